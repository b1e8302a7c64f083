//! Larder's transactional trees, `larder-trees`: each put one write
//! transaction of one insert (the shape of the trees bar of issue 22).

use anyhow::{Context, Result};
use larder_trees::{Durability, Tree, Trees, TreesOptions};

use super::Store;
use crate::objects::ObjSpec;

/// One store, one tree.
pub struct LarderTrees {
    trees: Trees,
    tree: Tree,
    settings: String,
}

fn durability(durable: bool) -> Durability {
    if durable {
        Durability::Durable
    } else {
        Durability::Buffered
    }
}

impl LarderTrees {
    /// Creates a new store with the suite's memtable and cache budgets and
    /// one tree.
    pub fn open(spec: &ObjSpec) -> Result<LarderTrees> {
        let path = spec.dir.join("larder-trees");
        let mut options = TreesOptions::default();
        options.store.index.memtable_size_bytes = spec.memtable_bytes as usize;
        options.store.index.block_cache_bytes = spec.cache_bytes as usize;
        let trees = Trees::create_dir_with(&path, &options)
            .with_context(|| format!("creating a store in {}", path.display()))?;
        let tree = trees.open_tree("bench").context("creating the tree")?;
        let settings = format!(
            "larder-trees {} (workspace): durable put = one write transaction of one insert, \
             commit(Durability::Durable) (the writer lock is released before the log sync, so concurrent \
             transactions share syncs); bulk loads one Buffered transaction per batch; get = Tree::get_into; index \
             memtable {} MiB and block cache {} MiB, other options default",
            env!("CARGO_PKG_VERSION"),
            spec.memtable_bytes >> 20,
            spec.cache_bytes >> 20
        );
        Ok(LarderTrees { trees, tree, settings })
    }
}

impl Store for LarderTrees {
    fn describe(&self) -> String {
        self.settings.clone()
    }

    fn counters(&self) -> std::collections::BTreeMap<String, f64> {
        let log = self.trees.store().log_stats();
        [("log_groups", log.groups), ("log_records", log.records), ("log_syncs", log.syncs)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v as f64))
            .collect()
    }

    fn put(&self, key: &str, value: &[u8], durable: bool) -> Result<()> {
        let mut tx = self.trees.write(durability(durable))?;
        tx.insert(&self.tree, key.as_bytes(), value)?;
        tx.commit()?;
        Ok(())
    }

    fn load(&self, items: &[(String, &[u8])]) -> Result<()> {
        let mut tx = self.trees.write(Durability::Buffered)?;
        for (key, value) in items {
            tx.insert(&self.tree, key.as_bytes(), value)?;
        }
        tx.commit()?;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.trees.sync()?;
        Ok(())
    }

    fn get(&self, key: &str, out: &mut Vec<u8>) -> Result<bool> {
        Ok(self.tree.get_into(key.as_bytes(), out)?)
    }

    fn delete(&self, key: &str) -> Result<bool> {
        let mut tx = self.trees.write(Durability::Durable)?;
        let existed = tx.get(&self.tree, key.as_bytes())?.is_some();
        tx.remove(&self.tree, key.as_bytes())?;
        tx.commit()?;
        Ok(existed)
    }

    fn close(self: Box<Self>) -> Result<()> {
        let LarderTrees { trees, tree, .. } = *self;
        drop(tree);
        trees.close()?;
        Ok(())
    }
}
