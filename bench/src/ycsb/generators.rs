//! YCSB's request generators, as its CoreWorkload builds them (YCSB 0.17,
//! `site.ycsb.generator`): the zipfian generator of Gray et al. ("Quickly
//! generating billion-record synthetic databases", SIGMOD 1994), its
//! scrambled form (draws over 10^10 items spread over the key space by an
//! FNV hash), the skewed "latest" generator of workload D, the insert
//! counter, uniform scan lengths, and the key names (`user` + the FNV hash
//! of the record number, YCSB's default `insertorder=hashed`).

/// YCSB's `zipfianconstant` (theta).
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// The item count the scrambled zipfian generator draws over
/// (`ScrambledZipfianGenerator.ITEM_COUNT`).
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// zeta(10^10 + 1, 0.99), precomputed by YCSB (`ScrambledZipfianGenerator.ZETAN`).
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

const FNV_OFFSET_BASIS_64: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// FNV-1a over `bytes` (64 bits).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET_BASIS_64, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(FNV_PRIME_64))
}

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 bytes of `value`, lowest
/// first, then the absolute value as a Java `long`.
pub fn fnvhash64(value: u64) -> u64 {
    (fnv1a64(&value.to_le_bytes()) as i64).unsigned_abs()
}

/// The key of record `keynum`: `user` followed by the decimal FNV hash of
/// the number (`CoreWorkload.buildKeyName` with hashed inserts, no padding).
pub fn key_name(keynum: u64) -> String {
    format!("user{}", fnvhash64(keynum))
}

/// A small, fast pseudo-random source (splitmix64); each generator takes
/// draws from the one the workload owns, so a run is reproducible from its
/// seed.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A source seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A double uniform in [0, 1) (53 random bits, as Java's `nextDouble`).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An integer uniform in `[low, high]`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }
}

/// zeta(n, theta) = sum over i in 1..=n of 1 / i^theta, continued from
/// `sum` (the value for `from` items).
pub fn zeta(from: u64, n: u64, theta: f64, sum: f64) -> f64 {
    (from..n).fold(sum, |acc, i| acc + 1.0 / ((i + 1) as f64).powf(theta))
}

/// YCSB's `ZipfianGenerator`: item `base + r` with probability about
/// 1 / ((r + 1)^theta * zeta(n, theta)); the item count may grow between
/// draws (zeta is then extended incrementally, as YCSB does).
#[derive(Clone, Debug)]
pub struct Zipfian {
    base: u64,
    /// The item count given at construction (YCSB's `items`, which its eta
    /// keeps using when the count grows).
    items: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    count_for_zeta: u64,
    eta: f64,
}

impl Zipfian {
    /// Items `min..=max`, zeta computed by summation.
    pub fn new(min: u64, max: u64, theta: f64) -> Zipfian {
        let items = max - min + 1;
        Self::with_zetan(min, max, theta, zeta(0, items, theta, 0.0))
    }

    /// Items `min..=max` with zeta(items, theta) given (precomputed).
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Zipfian {
        let items = max - min + 1;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan);
        Zipfian { base: min, items, theta, zeta2theta, alpha: 1.0 / (1.0 - theta), zetan, count_for_zeta: items, eta }
    }

    /// zeta(n, theta) as currently computed.
    #[cfg(test)]
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// A draw over the construction's item count.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        self.next_over(self.items, rng)
    }

    /// A draw over `item_count` items (`ZipfianGenerator.nextLong`): a
    /// larger count than before extends zeta; a smaller one keeps it, as
    /// YCSB does unless told otherwise.
    pub fn next_over(&mut self, item_count: u64, rng: &mut Rng) -> u64 {
        if item_count > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, item_count, self.theta, self.zetan);
            self.count_for_zeta = item_count;
            self.eta = (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2theta / self.zetan);
        }
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        let rank = (item_count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        self.base + rank.min(item_count.saturating_sub(1))
    }
}

/// YCSB's `ScrambledZipfianGenerator`: a zipfian draw over 10^10 items
/// (theta 0.99, zeta precomputed), hashed by FNV into `min..=max`, so the
/// popular items are scattered over the key space instead of clustered at
/// its start.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    min: u64,
    item_count: u64,
    zipfian: Zipfian,
}

impl ScrambledZipfian {
    /// Items `min..=max`.
    pub fn new(min: u64, max: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            min,
            item_count: max - min + 1,
            zipfian: Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
        }
    }

    /// The next item.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        self.min + fnvhash64(self.zipfian.next(rng)) % self.item_count
    }
}

/// The insert counter of the transaction phase (YCSB's
/// `AcknowledgedCounterGenerator` with one thread: every insert is
/// acknowledged when the next begins).
#[derive(Clone, Debug)]
pub struct InsertCounter {
    next: u64,
}

impl InsertCounter {
    /// Counting from `start` (the record count: records 0..start exist).
    pub fn new(start: u64) -> InsertCounter {
        InsertCounter { next: start }
    }

    /// The record number of the next insert.
    pub fn next_insert(&mut self) -> u64 {
        let value = self.next;
        self.next += 1;
        value
    }

    /// The highest record number inserted (YCSB's `lastValue`).
    pub fn last(&self) -> u64 {
        self.next - 1
    }
}

/// YCSB's `SkewedLatestGenerator`: `last - zipfian(last)`, so the most
/// recently inserted records are the most popular (workload D).
#[derive(Clone, Debug)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    /// Over the records inserted so far by `counter`.
    pub fn new(counter: &InsertCounter) -> SkewedLatest {
        let items = counter.last().max(1);
        SkewedLatest { zipfian: Zipfian::new(0, items - 1, ZIPFIAN_CONSTANT) }
    }

    /// The next record number (at most `counter.last()`).
    pub fn next(&mut self, counter: &InsertCounter, rng: &mut Rng) -> u64 {
        let max = counter.last();
        max - self.zipfian.next_over(max, rng)
    }
}

/// How a workload picks the record of a read, update or scan.
#[derive(Clone, Debug)]
pub enum KeyChooser {
    /// Scrambled zipfian over the loaded records plus twice the expected
    /// inserts (YCSB's `expectednewkeys`), retried until the record exists.
    Zipfian(ScrambledZipfian),
    /// Skewed towards the latest insert.
    Latest(SkewedLatest),
}

impl KeyChooser {
    /// `CoreWorkload.nextKeynum`: a record number that exists.
    pub fn next(&mut self, counter: &InsertCounter, rng: &mut Rng) -> u64 {
        match self {
            KeyChooser::Zipfian(z) => loop {
                let keynum = z.next(rng);
                if keynum <= counter.last() {
                    return keynum;
                }
            },
            KeyChooser::Latest(l) => l.next(counter, rng),
        }
    }
}

/// Scan lengths uniform in `1..=max` (YCSB's `scanlengthdistribution=uniform`).
pub fn scan_length(max: u64, rng: &mut Rng) -> u64 {
    rng.between(1, max.max(1))
}

#[cfg(test)]
#[path = "generators_tests.rs"]
mod tests;
