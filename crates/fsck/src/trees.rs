//! Checks of the transactional trees' records (map `0x70`, docs/format.md
//! section 19; rules T1-T3 of section 15).
//!
//! Catalog records sort first in the map, then the id high-water mark,
//! then counts and entries: by the time a count or an entry is read every
//! tree id is known, so each is checked as it is read; the counts are
//! compared with the entries found once the scan is over.

use std::collections::{BTreeMap, BTreeSet};

use larder_object::meta::{decode_tree_record, Map, MetaKey, TreeRecordKind};

use crate::model::Problems;
use crate::problem::Problem;
use crate::visit::Visitor;

/// What the scan learned about trees.
#[derive(Debug, Default)]
pub(crate) struct TreesModel {
    /// Catalog: id -> name (only records that decoded).
    pub(crate) by_id: BTreeMap<u64, String>,
    /// Some catalog value did not decode: a tree may be unknown, so
    /// "no such tree" is not reported.
    pub(crate) catalog_damaged: bool,
    pub(crate) next_id: Option<u64>,
    /// Count records that decoded, by tree.
    pub(crate) recorded: BTreeMap<u64, u64>,
    /// Some count record did not decode.
    pub(crate) counts_damaged: bool,
    /// Entries found, by tree.
    pub(crate) found: BTreeMap<u64, u64>,
    /// Trees without a catalog record already reported.
    pub(crate) reported: BTreeSet<u64>,
}

impl Visitor<'_> {
    /// A record of the trees map.
    pub(crate) fn tree_record(&mut self, key: &MetaKey, value: &[u8]) {
        match key {
            MetaKey::TreeCatalog { name } => match decode_tree_record(TreeRecordKind::Catalog, value) {
                Ok(id) => {
                    self.model.counts.trees += 1;
                    if let Some(first) = self.model.trees.by_id.insert(id, name.clone()) {
                        self.problems.push(Problem::TreeIdShared { id, first, second: name.clone() });
                    }
                }
                Err(e) => {
                    self.model.trees.catalog_damaged = true;
                    self.bad_value(key, e);
                }
            },
            MetaKey::TreeNextId => match decode_tree_record(TreeRecordKind::NextId, value) {
                Ok(next) => {
                    self.model.trees.next_id = Some(next);
                    let above: Vec<(u64, String)> =
                        self.model.trees.by_id.range(next..).map(|(id, n)| (*id, n.clone())).collect();
                    for (id, name) in above {
                        self.problems.push(Problem::TreeIdNotAllocated { id, name, next_tree_id: next });
                    }
                }
                Err(e) => self.bad_value(key, e),
            },
            &MetaKey::TreeCount { tree } => {
                self.check_tree_known(tree);
                match decode_tree_record(TreeRecordKind::Count, value) {
                    Ok(n) => {
                        self.model.trees.recorded.insert(tree, n);
                    }
                    Err(e) => {
                        self.model.trees.counts_damaged = true;
                        self.bad_value(key, e);
                    }
                }
            }
            &MetaKey::TreeEntry { tree, .. } => {
                self.model.counts.tree_entries += 1;
                self.check_tree_known(tree);
                *self.model.trees.found.entry(tree).or_insert(0) += 1;
            }
            _ => {}
        }
    }

    /// Rule T2: a count or an entry belongs to a tree of the catalog
    /// (reported once per tree).
    fn check_tree_known(&mut self, tree: u64) {
        let t = &mut self.model.trees;
        if t.catalog_damaged || t.by_id.contains_key(&tree) || !t.reported.insert(tree) {
            return;
        }
        if !self.model.complete(&[Map::Trees]) {
            return;
        }
        self.problems.push(Problem::TreeNotInCatalog { tree });
    }
}

/// Rule T3, once the scan is over: each tree's count record says how many
/// entries it has (no record: 0). Skipped when some of the map could not
/// be read.
pub(crate) fn check_counts(model: &crate::model::Model, problems: &mut Problems) {
    let t = &model.trees;
    if !model.complete(&[Map::Trees]) || t.counts_damaged {
        return;
    }
    for (&tree, name) in &t.by_id {
        let recorded = t.recorded.get(&tree).copied().unwrap_or(0);
        let found = t.found.get(&tree).copied().unwrap_or(0);
        if recorded != found {
            problems.push(Problem::TreeCountMismatch { tree, name: name.clone(), recorded, found });
        }
    }
}
