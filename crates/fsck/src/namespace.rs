//! The checks that need every key read first: the root (rule 2), every
//! directory reaching the root (rule 4), link counts and orphan records
//! (rule 5), directory entry counts (rule 6).
//! Each runs only if the maps it counts were read whole; otherwise it is
//! listed as skipped.

use std::collections::BTreeSet;

use larder_object::meta::{Kind, Map};
use larder_object::ROOT_ID;

use crate::model::{Model, Problems};
use crate::problem::Problem;
use crate::report::Skipped;

/// Runs the end-of-pass checks on `model`, noting in `skipped` those that
/// cannot run.
pub(crate) fn check(model: &Model, problems: &mut Problems, skipped: &mut BTreeSet<Skipped>) {
    if model.complete(&[Map::Omap]) {
        check_root(model, problems);
    }
    let links = model.complete(&[Map::Omap, Map::Dmap]);
    if links {
        check_reachable(model, problems);
    }
    let orphans = model.complete(&[Map::Omap, Map::Orphans]);
    for (&object, o) in &model.objects {
        if object == ROOT_ID {
            // The root's link count has its own rule (rule 2).
        } else if links && u64::from(o.nlink) != o.names + o.subdirs {
            problems.push(Problem::NlinkMismatch { object, nlink: o.nlink, dentries: o.names + o.subdirs });
        } else if orphans && o.nlink == 0 && !o.orphan {
            problems.push(Problem::UnnamedWithoutOrphan { object });
        }
        if let Some((_, recorded)) = o.dir.filter(|&(_, entries)| links && entries != o.entries) {
            problems.push(Problem::EntryCountMismatch { dir: object, recorded, found: o.entries });
        }
    }
    let table = [
        (model.complete(&[Map::Store]), Skipped::ObjectIds),
        (model.complete(&[Map::Omap]), Skipped::References),
        (links, Skipped::LinkCounts),
        (links, Skipped::EntryCounts),
        (orphans, Skipped::Orphans),
        (model.complete(&[Map::Xattr]), Skipped::Xattrs),
    ];
    skipped.extend(table.into_iter().filter(|&(ran, _)| !ran).map(|(_, s)| s));
}

/// Rule 4's last part: every named directory reaches the root through its
/// parents. Each chain is walked once: directories found to reach the root
/// (or not) are remembered, so the pass is linear in the directories.
fn check_reachable(model: &Model, problems: &mut Problems) {
    let mut reaches: BTreeSet<u64> = BTreeSet::from([ROOT_ID]);
    let mut lost: BTreeSet<u64> = BTreeSet::new();
    for (&start, o) in &model.objects {
        if o.dir.is_none() || o.names == 0 || reaches.contains(&start) || lost.contains(&start) {
            continue;
        }
        let mut chain = vec![start];
        let mut on_chain = BTreeSet::from([start]);
        let found = loop {
            let at = chain[chain.len() - 1];
            // A parent that is missing or no directory is rule 4's
            // dentry checks' to report: stop without a verdict.
            let Some((parent, _)) = model.objects.get(&at).and_then(|p| p.dir) else { break None };
            if reaches.contains(&parent) {
                break Some(true);
            }
            if lost.contains(&parent) || !on_chain.insert(parent) {
                break Some(false);
            }
            chain.push(parent);
        };
        match found {
            Some(true) => reaches.extend(chain),
            Some(false) => {
                for dir in chain {
                    if let Some((parent, _)) = model.objects.get(&dir).and_then(|o| o.dir) {
                        problems.push(Problem::DirectoryUnreachable { dir, parent });
                    }
                    lost.insert(dir);
                }
            }
            None => {}
        }
    }
}

/// Rule 2 (the parts not checked key by key: a dentry naming the root and
/// its orphan record are).
fn check_root(model: &Model, problems: &mut Problems) {
    let Some(root) = model.objects.get(&ROOT_ID) else {
        if !model.undecodable.contains(&ROOT_ID) {
            problems.push(Problem::RootMissing);
        }
        return;
    };
    if root.kind != Kind::Directory {
        problems.push(Problem::RootNotDirectory { kind: root.kind });
    }
    if let Some((parent, _)) = root.dir.filter(|&(p, _)| p != ROOT_ID) {
        problems.push(Problem::RootParent { parent });
    }
    if model.complete(&[Map::Dmap]) && u64::from(root.nlink) != root.subdirs {
        problems.push(Problem::RootLinked { nlink: root.nlink, subdirs: root.subdirs });
    }
}
