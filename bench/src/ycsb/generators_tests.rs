use super::*;

/// Draw frequencies of `draws` items below `items`.
fn histogram(items: u64, draws: u64, mut next: impl FnMut() -> u64) -> Vec<u64> {
    let mut counts = vec![0u64; items as usize];
    for _ in 0..draws {
        let item = next();
        assert!(item < items, "draw {item} out of 0..{items}");
        counts[item as usize] += 1;
    }
    counts
}

#[test]
fn fnv1a_matches_the_published_test_vectors() {
    // From the FNV reference (isthe.com/chongo/tech/comp/fnv): FNV-1a 64.
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn fnvhash64_hashes_the_little_endian_bytes_and_drops_the_sign() {
    for v in [0u64, 1, 255, 1 << 40, u64::MAX] {
        let h = fnv1a64(&v.to_le_bytes());
        assert_eq!(fnvhash64(v), (h as i64).unsigned_abs());
        assert!(fnvhash64(v) <= 1 << 63);
    }
    assert_ne!(fnvhash64(1), fnvhash64(2));
    assert!(key_name(7).starts_with("user"));
    assert_eq!(key_name(7), format!("user{}", fnvhash64(7)));
}

#[test]
fn zeta_sums_the_powers() {
    let direct: f64 = (1..=1000).map(|i| 1.0 / (i as f64).powf(0.99)).sum();
    assert!((zeta(0, 1000, 0.99, 0.0) - direct).abs() < 1e-9);
    // Extending from 400 items gives the same as summing all 1000.
    let part = zeta(0, 400, 0.99, 0.0);
    assert!((zeta(400, 1000, 0.99, part) - direct).abs() < 1e-9);
}

#[test]
fn scrambled_zetan_is_zeta_of_ten_billion_items() {
    // Sum the first million terms, then the Euler-Maclaurin tail:
    // sum_{i=m+1}^{n} i^-t ~ integral from m+1/2 to n+1/2 of x^-t dx.
    let theta = ZIPFIAN_CONSTANT;
    let m = 1_000_000u64;
    let n = SCRAMBLED_ITEM_COUNT + 1;
    let head = zeta(0, m, theta, 0.0);
    let antiderivative = |x: f64| x.powf(1.0 - theta) / (1.0 - theta);
    let tail = antiderivative(n as f64 + 0.5) - antiderivative(m as f64 + 0.5);
    let estimate = head + tail;
    assert!((estimate - SCRAMBLED_ZETAN).abs() < 1e-6, "zeta estimate {estimate} vs {SCRAMBLED_ZETAN}");
}

#[test]
fn zipfian_frequencies_follow_the_formula() {
    let items = 1000u64;
    let draws = 2_000_000u64;
    let mut rng = Rng::new(1);
    let mut z = Zipfian::new(0, items - 1, ZIPFIAN_CONSTANT);
    let counts = histogram(items, draws, || z.next(&mut rng));
    let zetan = zeta(0, items, ZIPFIAN_CONSTANT, 0.0);
    let expected = |rank: u64| draws as f64 / ((rank + 1) as f64).powf(ZIPFIAN_CONSTANT) / zetan;
    // The two most popular items are exact in Gray's method: within 2%.
    for rank in 0..2 {
        let got = counts[rank as usize] as f64;
        assert!((got / expected(rank) - 1.0).abs() < 0.02, "rank {rank}: {got} draws, formula {}", expected(rank));
    }
    // The rest follow the power law through the continuous approximation:
    // the mass of ranks [lo, hi) within 10% of the formula's.
    for (lo, hi) in [(2u64, 10u64), (10, 100), (100, 1000)] {
        let got: u64 = counts[lo as usize..hi as usize].iter().sum();
        let want: f64 = (lo..hi).map(expected).sum();
        assert!((got as f64 / want - 1.0).abs() < 0.10, "ranks {lo}..{hi}: {got} draws, formula {want:.0}");
    }
    // And popularity falls with rank.
    assert!(counts[0] > counts[1] && counts[1] > counts[5] && counts[5] > counts[50] && counts[50] > counts[500]);
}

#[test]
fn zipfian_extends_zeta_when_the_item_count_grows() {
    let mut rng = Rng::new(2);
    let mut z = Zipfian::new(0, 999, ZIPFIAN_CONSTANT);
    let _ = z.next_over(2000, &mut rng);
    assert!((z.zetan() - zeta(0, 2000, ZIPFIAN_CONSTANT, 0.0)).abs() < 1e-9);
    for _ in 0..10_000 {
        assert!(z.next_over(2000, &mut rng) < 2000);
    }
}

#[test]
fn scrambled_zipfian_spreads_the_hot_items_over_the_key_space() {
    let items = 100_000u64;
    let draws = 1_000_000u64;
    let mut rng = Rng::new(3);
    let mut z = ScrambledZipfian::new(0, items - 1);
    let counts = histogram(items, draws, || z.next(&mut rng));
    // The most popular record is the hash of zipfian rank 0, with rank 0's
    // share of the draws (1 / zeta(10^10)), plus whatever ranks collide on it.
    let hottest = counts.iter().enumerate().max_by_key(|(_, c)| **c).map(|(i, _)| i as u64);
    assert_eq!(hottest, Some(fnvhash64(0) % items));
    let share = counts[(fnvhash64(0) % items) as usize] as f64 / draws as f64;
    assert!((share * SCRAMBLED_ZETAN - 1.0).abs() < 0.1, "hottest share {share}");
    // Unscrambled, ranks 0..10 would all sit at the start; here the ten
    // hottest records are scattered: no two within 100 of each other.
    let mut order: Vec<u64> = (0..items).collect();
    order.sort_by_key(|i| std::cmp::Reverse(counts[*i as usize]));
    let mut hot: Vec<u64> = order[..10].to_vec();
    hot.sort_unstable();
    assert!(hot.windows(2).all(|w| w[1] - w[0] > 100), "hot records clustered: {hot:?}");
    // Each tenth of the key space gets between 4% and 25% of the draws.
    for decile in counts.chunks(items as usize / 10) {
        let share = decile.iter().sum::<u64>() as f64 / draws as f64;
        assert!((0.04..0.25).contains(&share), "a tenth of the key space got {share:.3} of the draws");
    }
}

#[test]
fn latest_prefers_the_newest_records_and_follows_inserts() {
    let mut rng = Rng::new(4);
    let mut counter = InsertCounter::new(10_000);
    assert_eq!(counter.last(), 9_999);
    let mut latest = SkewedLatest::new(&counter);
    let draws = 200_000u64;
    let counts = histogram(10_000, draws, || latest.next(&counter, &mut rng));
    // The newest record is drawn most, with the zipfian's rank-0 share.
    let zetan = zeta(0, 9_999, ZIPFIAN_CONSTANT, 0.0);
    let share = counts[9_999] as f64 / draws as f64;
    assert!((share * zetan - 1.0).abs() < 0.05, "newest record's share {share}");
    assert!(counts[9_999] > counts[9_990] && counts[9_990] > counts[9_000] && counts[9_000] > counts[1_000]);
    // After more inserts the newest record is the new one.
    for _ in 0..500 {
        counter.next_insert();
    }
    assert_eq!(counter.last(), 10_499);
    let counts = histogram(10_500, draws, || latest.next(&counter, &mut rng));
    assert!(counts[10_499] > counts[9_999] * 5, "newest {} vs old newest {}", counts[10_499], counts[9_999]);
}

#[test]
fn zipfian_key_chooser_never_picks_a_record_not_yet_inserted() {
    let mut rng = Rng::new(5);
    let mut counter = InsertCounter::new(1_000);
    // YCSB sizes the chooser for the records plus twice the expected inserts.
    let mut chooser = KeyChooser::Zipfian(ScrambledZipfian::new(0, 1_000 + 200));
    for round in 0..100 {
        for _ in 0..100 {
            assert!(chooser.next(&counter, &mut rng) <= counter.last(), "round {round}");
        }
        counter.next_insert();
    }
}

#[test]
fn scan_lengths_are_uniform_from_one_to_the_maximum() {
    let mut rng = Rng::new(6);
    let draws = 100_000u64;
    let counts = histogram(101, draws, || scan_length(100, &mut rng));
    assert_eq!(counts[0], 0, "a scan of length 0");
    let expected = draws as f64 / 100.0;
    for (len, &count) in counts.iter().enumerate().skip(1) {
        assert!((count as f64 / expected - 1.0).abs() < 0.15, "length {len}: {count} draws, expected {expected}");
    }
}
