//! A transaction's entry-count deltas, by directory, for directories whose
//! onode it has not written whole. Most transactions change the counts of
//! one directory (a create, an unlink) or none, so the first directory is
//! kept inline and only a second one allocates: a hash map allocated and
//! hashed on every create (5% of a create's work through the mount).

use crate::meta::DirDelta;

/// Deltas summed per directory, in the order the directories came.
#[derive(Debug, Default)]
pub(crate) struct DirDeltas {
    first: Option<(u64, DirDelta)>,
    more: Vec<(u64, DirDelta)>,
}

impl DirDeltas {
    /// Every directory and its summed delta, in the order they came.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, DirDelta)> + '_ {
        self.first.iter().chain(self.more.iter()).copied()
    }

    /// The summed delta of `dir`, if it has one.
    pub(crate) fn get(&self, dir: u64) -> Option<DirDelta> {
        self.iter().find(|(d, _)| *d == dir).map(|(_, delta)| delta)
    }

    /// Whether `dir` has a delta.
    pub(crate) fn contains(&self, dir: u64) -> bool {
        self.get(dir).is_some()
    }

    /// Adds `delta` to the sum of `dir`.
    pub(crate) fn add(&mut self, dir: u64, delta: DirDelta) {
        let sum = match &mut self.first {
            first @ None => &mut first.insert((dir, DirDelta::default())).1,
            Some((d, sum)) if *d == dir => sum,
            Some(_) => match self.more.iter().position(|(d, _)| *d == dir) {
                Some(at) => &mut self.more[at].1,
                None => {
                    self.more.push((dir, DirDelta::default()));
                    let last = self.more.len() - 1;
                    &mut self.more[last].1
                }
            },
        };
        sum.entries += delta.entries;
        sum.links += delta.links;
    }

    /// Forgets the delta of `dir` (its onode was written whole).
    pub(crate) fn remove(&mut self, dir: u64) {
        if self.first.is_some_and(|(d, _)| d == dir) {
            // The first of the others, if any, moves inline.
            self.first = (!self.more.is_empty()).then(|| self.more.remove(0));
        } else {
            self.more.retain(|(d, _)| *d != dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::DirDeltas;
    use crate::meta::DirDelta;

    /// An operation on the deltas: add to a directory, or remove one.
    #[derive(Clone, Debug)]
    enum Op {
        Add(u64, i64, i64),
        Remove(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u64..5, -3i64..4, -1i64..2).prop_map(|(d, e, l)| Op::Add(d, e, l)),
            1 => (0u64..5).prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// The deltas hold what a map summing per directory holds, each
        /// directory once, in the order it was first added since its last
        /// removal.
        #[test]
        fn sums_per_directory_as_a_map_does(ops in proptest::collection::vec(op(), 0..40)) {
            let mut deltas = DirDeltas::default();
            let mut model: BTreeMap<u64, DirDelta> = BTreeMap::new();
            let mut order: Vec<u64> = Vec::new();
            for op in ops {
                match op {
                    Op::Add(dir, entries, links) => {
                        deltas.add(dir, DirDelta { entries, links });
                        let sum = model.entry(dir).or_default();
                        sum.entries += entries;
                        sum.links += links;
                        if !order.contains(&dir) {
                            order.push(dir);
                        }
                    }
                    Op::Remove(dir) => {
                        deltas.remove(dir);
                        model.remove(&dir);
                        order.retain(|&d| d != dir);
                    }
                }
                for dir in 0..5 {
                    prop_assert_eq!(deltas.get(dir), model.get(&dir).copied());
                    prop_assert_eq!(deltas.contains(dir), model.contains_key(&dir));
                }
                let listed: Vec<u64> = deltas.iter().map(|(d, _)| d).collect();
                prop_assert_eq!(&listed, &order);
            }
        }
    }
}
