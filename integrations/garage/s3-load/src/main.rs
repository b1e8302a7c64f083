//! The S3 load of Larder's Garage benchmark (integrations/garage/bench.sh):
//!
//!     larder-s3-load --size BYTES --seconds S [--threads T] [--endpoint URL] [--puts-only]
//!
//! PutObject of BYTES-sized objects of fresh random bytes (so Garage can
//! neither deduplicate nor compress them) from T threads for S seconds,
//! each thread on its own keep-alive connection, then GetObject of random
//! ones of them for S seconds (not with `--puts-only`: a node whose block
//! store keeps no bytes, the ceiling of bench.sh, cannot answer them). Prints one line in the shape of
//! `s3_load.py bench`, with the median and 99th-percentile latencies; exits
//! 1 if any request failed. A client in Rust leaves the CPUs to the server:
//! boto3 spends about a millisecond of CPU on each request, which on a
//! two-core machine is a ceiling of its own.
//!
//! Credentials and bucket come from cluster.sh's fixed values (env
//! overrides: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, BUCKET, S3_REGION,
//! S3_ENDPOINTS: the first is used unless --endpoint is given).

mod http;
mod sigv4;

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sigv4::{Credentials, Stamp, UNSIGNED_PAYLOAD};

struct Options {
    size: usize,
    seconds: f64,
    threads: usize,
    puts_only: bool,
    host: String,
    bucket: String,
    credentials: Credentials,
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn parse_options() -> Result<Options, String> {
    let mut size = None;
    let mut seconds = None;
    let mut threads = 8;
    let mut puts_only = false;
    let endpoints = env_or("S3_ENDPOINTS", "http://127.0.0.1:3910");
    let mut endpoint = endpoints.split_whitespace().next().unwrap_or("http://127.0.0.1:3910").to_string();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--size" => size = Some(value()?.parse::<usize>().map_err(|e| format!("--size: {e}"))?),
            "--seconds" => seconds = Some(value()?.parse::<f64>().map_err(|e| format!("--seconds: {e}"))?),
            "--threads" => threads = value()?.parse::<usize>().map_err(|e| format!("--threads: {e}"))?,
            "--endpoint" => endpoint = value()?,
            "--puts-only" => puts_only = true,
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    let host = endpoint
        .strip_prefix("http://")
        .ok_or_else(|| format!("endpoint {endpoint}: only http:// endpoints are supported"))?
        .trim_end_matches('/')
        .to_string();
    if threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    Ok(Options {
        size: size.ok_or("--size is required")?,
        seconds: seconds.ok_or("--seconds is required")?,
        threads,
        puts_only,
        host,
        bucket: env_or("BUCKET", "larder-test"),
        credentials: Credentials {
            access_key: env_or("AWS_ACCESS_KEY_ID", "GK0123456789abcdef01234567"),
            secret_key: env_or(
                "AWS_SECRET_ACCESS_KEY",
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            ),
            region: env_or("S3_REGION", "garage"),
        },
    })
}

/// xorshift64*: fast bytes that no compressor or deduplicator can use.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// One thread's connection, re-made after an error.
struct Client<'a> {
    options: &'a Options,
    connection: Option<http::Connection>,
}

impl Client<'_> {
    /// Sends one signed request; Ok(true) for a 2xx answer with a body of
    /// `expected_length` (if given).
    fn send(&mut self, method: &str, key: &str, body: &[u8], expected_length: Option<usize>) -> bool {
        let options = self.options;
        if self.connection.is_none() {
            self.connection = http::Connection::connect(&options.host, Duration::from_secs(30)).ok();
        }
        let Some(connection) = self.connection.as_mut() else { return false };
        let path = format!("/{}/{key}", options.bucket);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let stamp = Stamp::from_unix(now);
        let authorization = sigv4::authorization(&options.credentials, &stamp, method, connection.host(), &path);
        let headers = [
            ("x-amz-content-sha256", UNSIGNED_PAYLOAD),
            ("x-amz-date", stamp.date_time.as_str()),
            ("authorization", authorization.as_str()),
        ];
        match connection.request(method, &path, &headers, body) {
            Ok(response) if (200..300).contains(&response.status) => {
                expected_length.is_none_or(|length| response.body.len() == length)
            }
            Ok(response) => {
                eprintln!(
                    "s3-load: {method} {path}: HTTP {}: {}",
                    response.status,
                    String::from_utf8_lossy(&response.body[..response.body.len().min(300)])
                );
                false
            }
            Err(e) => {
                eprintln!("s3-load: {method} {path}: {e}");
                self.connection = None;
                false
            }
        }
    }
}

/// What one phase did: successes, failures, and every success's latency.
#[derive(Default)]
struct Phase {
    done: AtomicU64,
    failed: AtomicU64,
    latencies: Mutex<Vec<Duration>>,
}

impl Phase {
    fn record(&self, ok: bool, latency: Duration, mine: &mut Vec<Duration>) {
        if ok {
            self.done.fetch_add(1, Ordering::Relaxed);
            mine.push(latency);
        } else {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn percentile_ms(&self, fraction: f64) -> f64 {
        let mut all = self.latencies.lock().map(|l| l.clone()).unwrap_or_default();
        if all.is_empty() {
            return 0.0;
        }
        all.sort_unstable();
        let index = ((all.len() - 1) as f64 * fraction).round() as usize;
        all[index].as_secs_f64() * 1e3
    }
}

/// Runs `work(thread, client, deadline, phase, latencies)` on every thread
/// until the deadline; returns the phase and its wall time.
fn run_phase<F>(options: &Options, work: F) -> (Phase, Duration)
where
    F: Fn(usize, &mut Client<'_>, Instant, &Phase, &mut Vec<Duration>) + Sync,
{
    let phase = Phase::default();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(options.seconds);
    std::thread::scope(|scope| {
        for thread in 0..options.threads {
            let (phase, work) = (&phase, &work);
            scope.spawn(move || {
                let mut client = Client { options, connection: None };
                let mut latencies = Vec::new();
                work(thread, &mut client, deadline, phase, &mut latencies);
                if let Ok(mut all) = phase.latencies.lock() {
                    all.extend(latencies);
                }
            });
        }
    });
    (phase, started.elapsed())
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(options) => options,
        Err(e) => {
            eprintln!("s3-load: {e}");
            return ExitCode::from(2);
        }
    };
    let written = Mutex::new(Vec::<String>::new());
    let (puts, put_time) = run_phase(&options, |thread, client, deadline, phase, latencies| {
        let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ (thread as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
        let mut body = vec![0u8; options.size];
        let mut mine = Vec::new();
        let mut index = 0u64;
        while Instant::now() < deadline {
            let key = format!("bench-{}/{thread:02}/{index:07}", options.size);
            index += 1;
            random.fill(&mut body);
            let started = Instant::now();
            let ok = client.send("PUT", &key, &body, None);
            phase.record(ok, started.elapsed(), latencies);
            if ok {
                mine.push(key);
            }
        }
        if let Ok(mut all) = written.lock() {
            all.extend(mine);
        }
    });
    let written = written.into_inner().unwrap_or_default();
    if written.is_empty() {
        eprintln!(
            "s3-load: no put succeeded in {:.1} s ({} failed)",
            put_time.as_secs_f64(),
            puts.failed.load(Ordering::Relaxed)
        );
        return ExitCode::from(1);
    }
    let (gets, get_time) = if options.puts_only {
        (Phase::default(), Duration::ZERO)
    } else {
        run_phase(&options, |thread, client, deadline, phase, latencies| {
            let mut random = Random(0xA076_1D64_78BD_642F ^ (thread as u64 + 1000));
            while Instant::now() < deadline {
                let key = &written[(random.next() % written.len() as u64) as usize];
                let started = Instant::now();
                let ok = client.send("GET", key, &[], Some(options.size));
                phase.record(ok, started.elapsed(), latencies);
            }
        })
    };
    let count = |phase: &Phase| phase.done.load(Ordering::Relaxed);
    let rate = |phase: &Phase, time: Duration| {
        if time.is_zero() {
            0.0
        } else {
            count(phase) as f64 / time.as_secs_f64()
        }
    };
    let failed = |phase: &Phase| phase.failed.load(Ordering::Relaxed);
    println!(
        "bench: size={} threads={} put_ops_per_s={:.1} get_ops_per_s={:.1} puts={} gets={} put_failures={} get_failures={} \
         put_p50_ms={:.3} put_p99_ms={:.3} get_p50_ms={:.3} get_p99_ms={:.3} puts_only={}",
        options.size,
        options.threads,
        rate(&puts, put_time),
        rate(&gets, get_time),
        count(&puts),
        count(&gets),
        failed(&puts),
        failed(&gets),
        puts.percentile_ms(0.5),
        puts.percentile_ms(0.99),
        gets.percentile_ms(0.5),
        gets.percentile_ms(0.99),
        u8::from(options.puts_only),
    );
    if failed(&puts) > 0 || failed(&gets) > 0 {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
