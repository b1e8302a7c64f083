//! The model the file system crash workloads run against: nodes, their
//! names, modes and xattrs, and the tree both the model and a live file
//! system show from the root (names, kinds, bytes, link counts and which
//! names share a file), so the two compare with `==`.

use std::collections::BTreeMap;

use larder_fs::{Cred, Fs, Kind};

/// A node of the model, named by a model id (the root is 0).
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    File(Vec<u8>),
    Dir,
    Symlink(Vec<u8>),
}

/// What a run expects of the file system.
#[derive(Default)]
pub struct Model {
    pub nodes: BTreeMap<u64, Node>,
    /// (directory, name) -> node.
    pub names: BTreeMap<(u64, String), u64>,
    /// The file system's inode of each node.
    pub ino: BTreeMap<u64, u64>,
    /// Permission bits and xattrs of files and directories.
    pub meta: BTreeMap<u64, Meta>,
    /// Open handles: (node, handle).
    pub open: Vec<(u64, u64)>,
    pub next: u64,
}

/// Permission bits and extended attributes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meta {
    pub mode: u32,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Meta {
    pub fn new(mode: u32) -> Meta {
        Meta { mode, xattrs: BTreeMap::new() }
    }
}

/// One entry of a tree as seen from its root.
#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    Dir(Meta),
    Symlink(Vec<u8>),
    /// Bytes, link count, the first path naming the same file, and its
    /// permission bits and xattrs.
    File(Vec<u8>, u32, String, Meta),
}

pub type Tree = BTreeMap<String, Seen>;

impl Model {
    pub fn new() -> Model {
        let mut m = Model { next: 1, ..Model::default() };
        m.nodes.insert(0, Node::Dir);
        m.meta.insert(0, Meta::new(0o755));
        m
    }

    pub fn dirs(&self) -> Vec<u64> {
        self.nodes.iter().filter(|(_, n)| **n == Node::Dir).map(|(id, _)| *id).collect()
    }

    pub fn links(&self, node: u64) -> u32 {
        self.names.values().filter(|&&n| n == node).count() as u32
    }

    /// Whether `dir` is `ancestor` or lies below it.
    pub fn within(&self, mut dir: u64, ancestor: u64) -> bool {
        loop {
            if dir == ancestor {
                return true;
            }
            match self.names.iter().find(|(_, &n)| n == dir) {
                Some(((parent, _), _)) => dir = *parent,
                None => return false,
            }
        }
    }

    /// A new node named `name` in `dir`: a file with mode 0o644 or a
    /// directory with 0o755, as the workloads make them (a symlink has no
    /// mode or xattrs). Returns its model id.
    pub fn add(&mut self, dir: u64, name: &str, node: Node) -> u64 {
        let id = self.next;
        self.next += 1;
        match node {
            Node::File(_) => self.meta.insert(id, Meta::new(0o644)),
            Node::Dir => self.meta.insert(id, Meta::new(0o755)),
            Node::Symlink(_) => None,
        };
        self.nodes.insert(id, node);
        self.names.insert((dir, name.to_string()), id);
        id
    }

    /// Removes `name` from `dir`; its node goes once nothing names or
    /// holds it.
    pub fn unname(&mut self, dir: u64, name: &str) {
        if let Some(node) = self.names.remove(&(dir, name.to_string())) {
            self.forget_if_unused(node);
        }
    }

    /// Drops `node` once nothing names or holds it.
    pub fn forget_if_unused(&mut self, node: u64) {
        if self.links(node) == 0 && !self.open.iter().any(|(n, _)| *n == node) {
            self.nodes.remove(&node);
            self.ino.remove(&node);
            self.meta.remove(&node);
        }
    }

    pub fn tree(&self) -> Tree {
        let mut paths: Vec<(String, u64)> = Vec::new();
        let mut stack = vec![(String::new(), 0u64)];
        while let Some((prefix, dir)) = stack.pop() {
            for ((_, name), &child) in self.names.range((dir, String::new())..(dir + 1, String::new())) {
                let path = format!("{prefix}/{name}");
                if self.nodes[&child] == Node::Dir {
                    stack.push((path.clone(), child));
                }
                paths.push((path, child));
            }
        }
        canonical(paths.into_iter().map(|(path, node)| {
            let seen = match &self.nodes[&node] {
                Node::Dir => Seen::Dir(self.meta[&node].clone()),
                Node::Symlink(t) => Seen::Symlink(t.clone()),
                Node::File(d) => Seen::File(d.clone(), self.links(node), String::new(), self.meta[&node].clone()),
            };
            (path, node, seen)
        }))
    }
}

/// The tree of `(path, identity, entry)`, each file entry given the first
/// path of its identity.
pub fn canonical(entries: impl Iterator<Item = (String, u64, Seen)>) -> Tree {
    let mut first: BTreeMap<u64, String> = BTreeMap::new();
    let entries: Vec<_> = entries.collect();
    for (path, id, _) in &entries {
        let f = first.entry(*id).or_insert_with(|| path.clone());
        if path < f {
            *f = path.clone();
        }
    }
    entries
        .into_iter()
        .map(|(path, id, seen)| {
            let seen = match seen {
                Seen::File(d, n, _, meta) => Seen::File(d, n, first[&id].clone(), meta),
                other => other,
            };
            (path, seen)
        })
        .collect()
}

/// The tree the file system shows.
pub fn tree_of(fs: &Fs) -> Tree {
    let r = Cred::root();
    let mut entries = Vec::new();
    let mut stack = vec![(String::new(), fs.root())];
    while let Some((prefix, dir)) = stack.pop() {
        for (name, _) in crate::common::entries(fs, dir).unwrap() {
            let path = format!("{prefix}/{}", String::from_utf8(name.clone()).unwrap());
            let attr = fs.lookup(&r, dir, &name).unwrap();
            let meta = || {
                let xattrs = fs.listxattr(&r, attr.ino).unwrap();
                let xattrs = xattrs.into_iter().map(|n| (n.clone(), fs.getxattr(&r, attr.ino, &n).unwrap()));
                Meta { mode: attr.mode & 0o7777, xattrs: xattrs.collect() }
            };
            let seen = match attr.kind {
                Kind::Directory => {
                    stack.push((path.clone(), attr.ino));
                    Seen::Dir(meta())
                }
                Kind::Symlink => Seen::Symlink(fs.readlink(attr.ino).unwrap()),
                _ => {
                    let fh = fs.open_file(&r, attr.ino, libc::O_RDONLY).unwrap();
                    let data = fs.read(fh, 0, attr.size as usize + 1).unwrap();
                    fs.release(fh).unwrap();
                    Seen::File(data, attr.nlink, String::new(), meta())
                }
            };
            entries.push((path, attr.ino, seen));
        }
    }
    canonical(entries.into_iter())
}
