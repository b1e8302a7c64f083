//! The paper's micro benchmarks (Figs 4-1 to 4-4) in a child: for objects of
//! 1 KiB to `max_object` bytes (doubling) and buffers of 1, 64, 512 and
//! 1024 B, a sequential read of the whole object into the buffer, a
//! sequential write of it from the buffer, random 512 B reads each after a
//! seek, and a copy into a new object; then attach by name + read 1 KiB +
//! close. Every pass is repeated until it did about `micro_ops` reads or
//! writes (copies: at most [`MAX_COPIES`]), and the phase is named
//! `op/size/buffer` (`copy/size/0` for `std::fs::copy`, which has no buffer).

use std::fs::File;
use std::hint::black_box;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use rustix::fs::{Mode, OFlags, SeekFrom};

use super::{child, HeapPhase, HeapResult, HeapSpec};
use crate::workload::mix64;

/// The smallest object, bytes.
pub const MIN_OBJECT: u64 = 1024;
/// The buffer sizes of the paper.
pub const BUFFERS: [usize; 4] = [1, 64, 512, 1024];
/// The random reads' size.
pub const SEEK_READ: usize = 512;
/// The object of the attach phase, bytes.
pub const ATTACH_BYTES: usize = 1024;
/// Copies per case at most (each makes a new object).
pub const MAX_COPIES: u64 = 1000;

/// One engine's access to objects, one object at a time.
pub trait Target {
    /// What the engine is, for the report.
    fn describe(&self) -> String;
    /// Creates the object of this size class holding `data`, and keeps it
    /// ready (open, mapped) for the passes.
    fn create(&mut self, data: &[u8]) -> Result<()>;
    /// Reads the whole object into `buf`, `buf.len()` bytes at a time.
    fn read_pass(&mut self, buf: &mut [u8]) -> Result<()>;
    /// Writes the whole object from `buf`, `buf.len()` bytes at a time.
    fn write_pass(&mut self, buf: &[u8]) -> Result<()>;
    /// Seeks to `offset`, then reads `buf.len()` bytes.
    fn random_read(&mut self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Copies the object into a new one, `chunk` bytes at a time (timed).
    fn copy(&mut self, chunk: usize) -> Result<()>;
    /// Removes the copy (not timed).
    fn remove_copy(&mut self) -> Result<()>;
    /// Closes and removes the object.
    fn remove(&mut self) -> Result<()>;
    /// Creates the named 1 KiB object of the attach phase, then closes it.
    fn create_named(&mut self, data: &[u8]) -> Result<()>;
    /// Attaches (opens) the named object, reads it into `buf`, closes it.
    fn attach_read_close(&mut self, buf: &mut [u8]) -> Result<()>;
}

/// Runs the micro workload on `spec.engine`.
pub fn run(spec: &HeapSpec) -> Result<HeapResult> {
    if spec.engine == "fscopy" {
        return fs_copy(spec);
    }
    let mut target: Box<dyn Target> = match spec.engine.as_str() {
        "ext4" => Box::new(Syscalls::new(&spec.dir)),
        "mmap" => Box::new(Mapped::new(&spec.dir)),
        #[cfg(feature = "larder-heap")]
        "larder" => Box::new(super::larder::MicroHeap::open(&spec.dir)?),
        other => bail!("{other} does not run the micro workload"),
    };
    let phases = drive(&mut *target, spec)?;
    Ok(child::result(spec, target.describe(), phases))
}

/// The object sizes of a run.
pub fn sizes(max_object: u64) -> Vec<u64> {
    std::iter::successors(Some(MIN_OBJECT), |s| Some(s * 2)).take_while(|s| *s <= max_object).collect()
}

/// Pseudo-random bytes of the seed.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    (0..len.div_ceil(8) as u64)
        .flat_map(|i| mix64(seed ^ 0x006d_6963_726f ^ (i << 20)).to_le_bytes())
        .take(len)
        .collect()
}

fn phase(name: String, ops: u64, secs: f64, bytes: u64) -> HeapPhase {
    HeapPhase { name, ops, secs, bytes, vmhwm_kib: crate::sys::status_kib("VmHWM"), extra: Default::default() }
}

/// Runs every case on one target.
pub fn drive(t: &mut dyn Target, spec: &HeapSpec) -> Result<Vec<HeapPhase>> {
    let mut phases = Vec::new();
    let data = bytes(spec.max_object as usize, spec.seed);
    for size in sizes(spec.max_object) {
        let s = size as usize;
        t.create(&data[..s])?;
        for &b in &BUFFERS {
            let mut buf = vec![0u8; b];
            let passes = (spec.micro_ops * b as u64).div_ceil(size).max(1);
            let ops = passes * (size / b as u64);
            let start = Instant::now();
            for _ in 0..passes {
                t.read_pass(&mut buf)?;
            }
            phases.push(phase(format!("read/{size}/{b}"), ops, start.elapsed().as_secs_f64(), passes * size));
            buf.copy_from_slice(&data[..b]);
            let start = Instant::now();
            for _ in 0..passes {
                t.write_pass(&buf)?;
            }
            phases.push(phase(format!("write/{size}/{b}"), ops, start.elapsed().as_secs_f64(), passes * size));
            let copies = passes.min(MAX_COPIES);
            let mut secs = 0.0;
            for _ in 0..copies {
                let start = Instant::now();
                t.copy(b)?;
                secs += start.elapsed().as_secs_f64();
                t.remove_copy()?;
            }
            phases.push(phase(format!("copy/{size}/{b}"), copies, secs, copies * size));
        }
        let per_pass = size / SEEK_READ as u64;
        let reads = spec.micro_ops.max(per_pass);
        let offsets: Vec<u64> = (0..reads)
            .map(|i| mix64(spec.seed ^ 0x7365_656b ^ (size << 32) ^ i) % (size - SEEK_READ as u64 + 1))
            .collect();
        let mut buf = vec![0u8; SEEK_READ];
        let start = Instant::now();
        for &o in &offsets {
            t.random_read(o, &mut buf)?;
        }
        let name = format!("seek/{size}/{SEEK_READ}");
        phases.push(phase(name, reads, start.elapsed().as_secs_f64(), reads * SEEK_READ as u64));
        t.remove()?;
    }
    t.create_named(&data[..ATTACH_BYTES])?;
    let mut buf = vec![0u8; ATTACH_BYTES];
    let start = Instant::now();
    for _ in 0..spec.attaches {
        t.attach_read_close(&mut buf)?;
    }
    let secs = start.elapsed().as_secs_f64();
    ensure!(buf == data[..ATTACH_BYTES], "the attached object's bytes are not the ones written");
    phases.push(phase(format!("attach/{ATTACH_BYTES}"), spec.attaches, secs, spec.attaches * ATTACH_BYTES as u64));
    Ok(phases)
}

/// `std::fs::copy` of a file of each size (the copy peer).
fn fs_copy(spec: &HeapSpec) -> Result<HeapResult> {
    let data = bytes(spec.max_object as usize, spec.seed);
    let mut phases = Vec::new();
    let src = spec.dir.join("source");
    let dst = spec.dir.join("copy");
    for size in sizes(spec.max_object) {
        std::fs::write(&src, &data[..size as usize]).with_context(|| format!("writing {}", src.display()))?;
        let copies = (spec.micro_ops * ATTACH_BYTES as u64).div_ceil(size).clamp(1, MAX_COPIES);
        let mut secs = 0.0;
        for _ in 0..copies {
            let start = Instant::now();
            std::fs::copy(&src, &dst).with_context(|| format!("copying to {}", dst.display()))?;
            secs += start.elapsed().as_secs_f64();
            std::fs::remove_file(&dst)?;
        }
        phases.push(phase(format!("copy/{size}/0"), copies, secs, copies * size));
    }
    let info = "std::fs::copy (copy_file_range on Linux) into a new file, no buffer".to_string();
    Ok(child::result(spec, info, phases))
}

/// ext4 through system calls: read(2), write(2) and lseek(2) on an open
/// file, as the paper's standard file system.
struct Syscalls {
    dir: PathBuf,
    file: Option<OwnedFd>,
    size: usize,
}

impl Syscalls {
    fn new(dir: &Path) -> Syscalls {
        Syscalls { dir: dir.to_path_buf(), file: None, size: 0 }
    }

    fn fd(&self) -> Result<&OwnedFd> {
        self.file.as_ref().context("no object is open")
    }

    fn open(path: &Path, create: bool) -> Result<OwnedFd> {
        let flags = if create { OFlags::RDWR | OFlags::CREATE | OFlags::TRUNC } else { OFlags::RDWR };
        rustix::fs::open(path, flags | OFlags::CLOEXEC, Mode::from_raw_mode(0o644))
            .with_context(|| format!("opening {}", path.display()))
    }
}

/// Reads exactly `buf.len()` bytes with read(2).
fn read_exact(fd: impl AsFd, buf: &mut [u8]) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let n = rustix::io::read(&fd, &mut buf[done..]).context("read")?;
        ensure!(n > 0, "the file ended early");
        done += n;
    }
    Ok(())
}

/// Writes all of `buf` with write(2).
fn write_all(fd: impl AsFd, buf: &[u8]) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        done += rustix::io::write(&fd, &buf[done..]).context("write")?;
    }
    Ok(())
}

impl Target for Syscalls {
    fn describe(&self) -> String {
        format!("read(2)/write(2)/lseek(2) on a file, {}", crate::sys::filesystem_of(&self.dir))
    }

    fn create(&mut self, data: &[u8]) -> Result<()> {
        let fd = Self::open(&self.dir.join("object"), true)?;
        write_all(&fd, data)?;
        self.file = Some(fd);
        self.size = data.len();
        Ok(())
    }

    fn read_pass(&mut self, buf: &mut [u8]) -> Result<()> {
        let fd = self.fd()?;
        rustix::fs::seek(fd, SeekFrom::Start(0)).context("lseek")?;
        for _ in 0..self.size / buf.len() {
            read_exact(fd, buf)?;
            black_box(&mut *buf);
        }
        Ok(())
    }

    fn write_pass(&mut self, buf: &[u8]) -> Result<()> {
        let fd = self.fd()?;
        rustix::fs::seek(fd, SeekFrom::Start(0)).context("lseek")?;
        for _ in 0..self.size / buf.len() {
            write_all(fd, black_box(buf))?;
        }
        Ok(())
    }

    fn random_read(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let fd = self.fd()?;
        rustix::fs::seek(fd, SeekFrom::Start(offset)).context("lseek")?;
        read_exact(fd, buf)?;
        black_box(buf);
        Ok(())
    }

    fn copy(&mut self, chunk: usize) -> Result<()> {
        let src = Self::open(&self.dir.join("object"), false)?;
        let dst = Self::open(&self.dir.join("copy"), true)?;
        let mut buf = vec![0u8; chunk];
        for _ in 0..self.size / chunk {
            read_exact(&src, &mut buf)?;
            write_all(&dst, &buf)?;
        }
        Ok(())
    }

    fn remove_copy(&mut self) -> Result<()> {
        std::fs::remove_file(self.dir.join("copy")).context("removing the copy")
    }

    fn remove(&mut self) -> Result<()> {
        self.file = None;
        std::fs::remove_file(self.dir.join("object")).context("removing the object")
    }

    fn create_named(&mut self, data: &[u8]) -> Result<()> {
        let fd = Self::open(&self.dir.join("named"), true)?;
        write_all(&fd, data)
    }

    fn attach_read_close(&mut self, buf: &mut [u8]) -> Result<()> {
        let fd = Self::open(&self.dir.join("named"), false)?;
        read_exact(&fd, buf)?;
        drop(fd);
        Ok(())
    }
}

/// A file of the given length mapped MAP_SHARED read-write; unmapped on drop.
pub struct Mapping {
    address: *mut u8,
    len: usize,
}

impl Mapping {
    /// Maps all of `file` (`len` bytes, at least 1).
    pub fn new(file: &File, len: usize) -> Result<Mapping> {
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of a file we hold open, at an address
        // the kernel picks; nothing else refers to it until we return it.
        #[allow(unsafe_code)]
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if address == libc::MAP_FAILED {
            bail!("mmap: {}", std::io::Error::last_os_error());
        }
        Ok(Mapping { address: address.cast(), len })
    }

    /// The mapped bytes.
    pub fn bytes(&mut self) -> (*mut u8, usize) {
        (self.address, self.len)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the range is the one mmap returned, unmapped only here.
        #[allow(unsafe_code)]
        unsafe {
            libc::munmap(self.address.cast(), self.len);
        }
    }
}

/// Copies the `len` bytes at `base` into `buf`, `buf.len()` at a time.
///
/// # Safety
/// `base..base + len` must be mapped and readable for the call.
#[allow(unsafe_code)]
pub unsafe fn mapped_read_pass(base: *const u8, len: usize, buf: &mut [u8]) {
    let b = buf.len();
    for i in 0..len / b {
        // SAFETY: i * b + b <= len, inside the mapping the caller vouches for.
        unsafe { std::ptr::copy_nonoverlapping(base.add(i * b), buf.as_mut_ptr(), b) };
        black_box(&mut *buf);
    }
}

/// Copies `buf` over the `len` bytes at `base`, `buf.len()` at a time.
///
/// # Safety
/// `base..base + len` must be mapped and writable, and not aliased by a
/// Rust reference, for the call.
#[allow(unsafe_code)]
pub unsafe fn mapped_write_pass(base: *mut u8, len: usize, buf: &[u8]) {
    let b = buf.len();
    for i in 0..len / b {
        // SAFETY: i * b + b <= len, inside the mapping the caller vouches for.
        unsafe { std::ptr::copy_nonoverlapping(black_box(buf).as_ptr(), base.add(i * b), b) };
    }
}

/// Copies `buf.len()` bytes at `base + offset` into `buf`.
///
/// # Safety
/// `base + offset .. + buf.len()` must be mapped and readable.
#[allow(unsafe_code)]
pub unsafe fn mapped_read_at(base: *const u8, offset: u64, buf: &mut [u8]) {
    // SAFETY: the caller vouches for the range.
    unsafe { std::ptr::copy_nonoverlapping(base.add(offset as usize), buf.as_mut_ptr(), buf.len()) };
    black_box(buf);
}

/// The ceiling of the mapped path: a plain file mapped MAP_SHARED, accessed
/// exactly as Larder's object (copy: a new file, sized, mapped, filled).
struct Mapped {
    dir: PathBuf,
    map: Option<Mapping>,
}

impl Mapped {
    fn new(dir: &Path) -> Mapped {
        Mapped { dir: dir.to_path_buf(), map: None }
    }

    fn map_new(&self, name: &str, len: usize) -> Result<Mapping> {
        let path = self.dir.join(name);
        let file = File::options().read(true).write(true).create(true).truncate(true).open(&path)?;
        file.set_len(len as u64)?;
        Mapping::new(&file, len)
    }

    fn bytes(&mut self) -> Result<(*mut u8, usize)> {
        Ok(self.map.as_mut().context("no object is mapped")?.bytes())
    }
}

#[allow(unsafe_code)]
impl Target for Mapped {
    fn describe(&self) -> String {
        format!("ceiling: a plain file mmap'ed MAP_SHARED, {}", crate::sys::filesystem_of(&self.dir))
    }

    fn create(&mut self, data: &[u8]) -> Result<()> {
        let mut map = self.map_new("object", data.len())?;
        let (p, _) = map.bytes();
        // SAFETY: the mapping is data.len() bytes, ours alone.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        self.map = Some(map);
        Ok(())
    }

    fn read_pass(&mut self, buf: &mut [u8]) -> Result<()> {
        let (p, len) = self.bytes()?;
        // SAFETY: the whole mapping, alive while self.map holds it.
        unsafe { mapped_read_pass(p, len, buf) };
        Ok(())
    }

    fn write_pass(&mut self, buf: &[u8]) -> Result<()> {
        let (p, len) = self.bytes()?;
        // SAFETY: the whole mapping, alive while self.map holds it; no reference aliases it.
        unsafe { mapped_write_pass(p, len, buf) };
        Ok(())
    }

    fn random_read(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let (p, len) = self.bytes()?;
        ensure!(offset as usize + buf.len() <= len, "read past the object");
        // SAFETY: checked in bounds just above.
        unsafe { mapped_read_at(p, offset, buf) };
        Ok(())
    }

    fn copy(&mut self, chunk: usize) -> Result<()> {
        let (src, len) = self.bytes()?;
        let mut dst = self.map_new("copy", len)?;
        let (d, _) = dst.bytes();
        for i in 0..len / chunk {
            // SAFETY: both mappings are len bytes; i * chunk + chunk <= len.
            unsafe { std::ptr::copy_nonoverlapping(src.add(i * chunk), d.add(i * chunk), chunk) };
        }
        Ok(())
    }

    fn remove_copy(&mut self) -> Result<()> {
        std::fs::remove_file(self.dir.join("copy")).context("removing the copy")
    }

    fn remove(&mut self) -> Result<()> {
        self.map = None;
        std::fs::remove_file(self.dir.join("object")).context("removing the object")
    }

    fn create_named(&mut self, data: &[u8]) -> Result<()> {
        std::fs::write(self.dir.join("named"), data).context("writing the named object")
    }

    fn attach_read_close(&mut self, buf: &mut [u8]) -> Result<()> {
        let file = File::options().read(true).write(true).open(self.dir.join("named"))?;
        let mut map = Mapping::new(&file, buf.len())?;
        drop(file);
        let (p, len) = map.bytes();
        // SAFETY: the mapping is buf.len() bytes.
        unsafe { mapped_read_pass(p, len, buf) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads, writes, seeks and copies move the right bytes on `t`, whose
    /// files live in `dir`.
    fn moves_the_right_bytes(t: &mut dyn Target, dir: &Path) {
        let data = bytes(4096, 9);
        t.create(&data).expect("create");
        let mut buf = vec![0u8; 64];
        t.read_pass(&mut buf).expect("read");
        assert_eq!(buf, data[4096 - 64..], "a read pass ends with the object's last buffer");
        let mut at = vec![0u8; SEEK_READ];
        t.random_read(1000, &mut at).expect("random read");
        assert_eq!(at, data[1000..1000 + SEEK_READ]);
        let pattern: Vec<u8> = (0..64u8).collect();
        t.write_pass(&pattern).expect("write");
        t.random_read(128, &mut at).expect("random read");
        assert!(at.chunks(64).all(|c| c == pattern.as_slice()), "a write pass repeats the buffer over the object");
        t.copy(512).expect("copy");
        if dir.join("copy").exists() {
            let copy = std::fs::read(dir.join("copy")).expect("reading the copy");
            assert_eq!(copy.len(), 4096);
            assert!(copy.chunks(64).all(|c| c == pattern.as_slice()), "the copy has the object's bytes");
        }
        t.remove_copy().expect("remove copy");
        t.remove().expect("remove");
        t.create_named(&data[..ATTACH_BYTES]).expect("create named");
        let mut one = vec![0u8; ATTACH_BYTES];
        t.attach_read_close(&mut one).expect("attach");
        assert_eq!(one, data[..ATTACH_BYTES]);
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("larder-bench-micro-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn system_calls_move_the_right_bytes() {
        let dir = temp_dir("ext4");
        moves_the_right_bytes(&mut Syscalls::new(&dir), &dir);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_mapped_ceiling_moves_the_right_bytes() {
        let dir = temp_dir("mmap");
        moves_the_right_bytes(&mut Mapped::new(&dir), &dir);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(feature = "larder-heap")]
    #[test]
    fn the_heap_object_moves_the_right_bytes() {
        let dir = temp_dir("larder");
        let mut heap = super::super::larder::MicroHeap::open(&dir).expect("heap");
        moves_the_right_bytes(&mut heap, &dir);
        drop(heap);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sizes_double_from_one_kib() {
        assert_eq!(sizes(8192), vec![1024, 2048, 4096, 8192]);
        assert_eq!(sizes(2 << 20).len(), 12);
    }
}
