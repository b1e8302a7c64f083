//! The locate workload in a child: write the tree's sorted path list and the
//! names to search, then build the engine's database from the list and
//! search every name. Every engine's answers (matches and the sum of the
//! matching paths' checksums) are checked against a scan of the list, so an
//! engine that finds less, or more, fails instead of looking fast.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use serde::{Deserialize, Serialize};

use super::child::{self, field, json_line, run_program, run_program_to, FRCODE, GNU_LOCATE, PLOCATE, PLOCATE_BUILD};
use super::paths::{self, path_checksum};
use super::{HeapPhase, HeapResult, HeapSpec};

/// The answers every engine must give: (matches, checksum of the matching paths).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Expected {
    /// For all the names.
    all: (u64, u64),
    /// For the names searched by fresh processes.
    fresh: (u64, u64),
}

/// The inputs of one locate case. The parent writes them once per tree
/// ([`Inputs::prepare`]), so a child holds only what its engine reads (and a
/// peer program it starts does not inherit the memory of the whole list).
pub struct Inputs {
    /// Entries in the tree (paths in the list).
    pub entries: u64,
    /// The names searched, warm.
    pub names: Vec<String>,
    /// The names searched by fresh processes (the first of `names`).
    #[cfg_attr(not(feature = "larder-heap"), allow(dead_code))] // Larder's side uses it.
    pub fresh_names: Vec<String>,
    /// The sorted path list, one a line.
    pub path_list: PathBuf,
    /// The names, one a line.
    pub name_list: PathBuf,
    expected: Expected,
}

const PATHS_FILE: &str = "paths.txt";
const NAMES_FILE: &str = "names.txt";
const EXPECTED_FILE: &str = "expected.json";

impl Inputs {
    /// Writes the path list, the names and their answers for a tree of
    /// `tree` entries into `dir`.
    pub fn prepare(dir: &Path, tree: u64, searches: u64, fresh_searches: u64, seed: u64) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let paths = paths::tree(tree, seed);
        let names = paths::queries(&paths, searches, seed);
        let mut by_name: HashMap<&str, (u64, u64)> = HashMap::new();
        for p in &paths {
            let e = by_name.entry(paths::base_name(p)).or_default();
            e.0 += 1;
            e.1 = e.1.wrapping_add(path_checksum(p.as_bytes()));
        }
        let answer = |names: &[String]| {
            names
                .iter()
                .filter_map(|n| by_name.get(n.as_str()))
                .fold((0u64, 0u64), |(m, c), (m2, c2)| (m + m2, c.wrapping_add(*c2)))
        };
        let fresh = names.len().min(fresh_searches as usize);
        let expected = Expected { all: answer(&names), fresh: answer(&names[..fresh]) };
        write_lines(&dir.join(PATHS_FILE), &paths)?;
        write_lines(&dir.join(NAMES_FILE), &names)?;
        std::fs::write(dir.join(EXPECTED_FILE), serde_json::to_string(&expected)?)?;
        Ok(())
    }

    /// Reads the names and answers the parent prepared in `spec.inputs`.
    fn load(spec: &HeapSpec) -> Result<Inputs> {
        let dir = &spec.inputs;
        let name_list = dir.join(NAMES_FILE);
        let text = std::fs::read_to_string(&name_list).with_context(|| format!("reading {}", name_list.display()))?;
        let names: Vec<String> = text.lines().map(str::to_string).collect();
        let fresh_names = names.iter().take(spec.fresh_searches as usize).cloned().collect();
        let expected: Expected = serde_json::from_str(&std::fs::read_to_string(dir.join(EXPECTED_FILE))?)?;
        let path_list = dir.join(PATHS_FILE);
        let entries = std::fs::read(&path_list)?.iter().filter(|&&b| b == b'\n').count() as u64;
        Ok(Inputs { entries, names, fresh_names, path_list, name_list, expected })
    }

    /// The sorted paths (read from the list).
    #[cfg_attr(not(feature = "larder-heap"), allow(dead_code))] // Larder's side uses it.
    pub fn paths(&self) -> Result<Vec<String>> {
        let text = std::fs::read_to_string(&self.path_list)
            .with_context(|| format!("reading {}", self.path_list.display()))?;
        Ok(text.lines().map(str::to_string).collect())
    }

    /// Fails unless an engine's answers for all the names are the list's.
    pub fn check(&self, engine: &str, matches: u64, checksum: u64) -> Result<()> {
        check(engine, (matches, checksum), self.expected.all)
    }

    /// Fails unless an engine's answers for the fresh names are the list's.
    #[cfg_attr(not(feature = "larder-heap"), allow(dead_code))] // Larder's side uses it.
    pub fn check_fresh(&self, engine: &str, matches: u64, checksum: u64) -> Result<()> {
        check(engine, (matches, checksum), self.expected.fresh)
    }
}

fn check(engine: &str, (matches, checksum): (u64, u64), (want_matches, want_checksum): (u64, u64)) -> Result<()> {
    ensure!(
        matches == want_matches && checksum == want_checksum,
        "{engine} found {matches} paths (checksum {checksum:#x}) where the list has {want_matches} \
         (checksum {want_checksum:#x})"
    );
    Ok(())
}

fn write_lines(path: &Path, lines: &[String]) -> Result<()> {
    let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Writes the file's data to disk, as every engine's build does before it ends.
fn fsync(path: &Path) -> Result<()> {
    std::fs::File::open(path).and_then(|f| f.sync_all()).with_context(|| format!("syncing {}", path.display()))
}

/// A phase with the figures every locate phase carries.
pub fn phase(name: &str, ops: u64, secs: f64, vmhwm_kib: u64, extra: &[(&str, f64)]) -> HeapPhase {
    HeapPhase {
        name: name.to_string(),
        ops,
        secs,
        bytes: 0,
        vmhwm_kib,
        extra: extra.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

/// Runs the locate case of `spec.engine`.
pub fn run(spec: &HeapSpec) -> Result<HeapResult> {
    let inputs = Inputs::load(spec)?;
    let entries = inputs.entries as f64;
    let (info, mut phases) = match spec.engine.as_str() {
        "baseline" => baseline(spec, &inputs)?,
        "locate" => tool(spec, &inputs, false)?,
        "plocate" => tool(spec, &inputs, true)?,
        #[cfg(feature = "larder-heap")]
        "larder" => super::larder::locate(spec, &inputs)?,
        other => anyhow::bail!("{other} does not run the locate workload"),
    };
    for p in &mut phases {
        p.extra.insert("entries".to_string(), entries);
    }
    Ok(child::result(spec, info, phases))
}

/// The paper's baseline: bench/peers/locate_baseline builds (encode + write +
/// fsync, timed inside) and scans (open + read + decode per search, timed inside).
fn baseline(spec: &HeapSpec, inputs: &Inputs) -> Result<(String, Vec<HeapPhase>)> {
    let program = spec.peers.join("locate_baseline");
    let db = spec.dir.join("baseline.db");
    let db_text = db.to_string_lossy().into_owned();
    let built = run_program(&program, &["build", &inputs.path_list.to_string_lossy(), &db_text])?;
    let b = json_line(&built.stdout)?;
    let build = phase(
        "build",
        field(&b, "paths")? as u64,
        field(&b, "secs")?,
        field(&b, "vmhwm_kib")? as u64,
        &[("db_bytes", field(&b, "db_bytes")?), ("wall_secs", built.secs)],
    );
    // One pass to have the database in the page cache (it was just written, so
    // it is already: this makes sure), then the timed pass.
    run_program(&program, &["search", &db_text, &inputs.name_list.to_string_lossy()])?;
    let searched = run_program(&program, &["search", &db_text, &inputs.name_list.to_string_lossy()])?;
    let s = json_line(&searched.stdout)?;
    let (matches, checksum) = (field(&s, "matches")? as u64, s.get("checksum").and_then(|v| v.as_u64()).unwrap_or(0));
    inputs.check("baseline", matches, checksum)?;
    let search = phase(
        "search",
        field(&s, "searches")? as u64,
        field(&s, "secs")?,
        field(&s, "vmhwm_kib")? as u64,
        &[("matches", matches as f64)],
    );
    let info = "front-coded LOCATE02 database (as GNU frcode / slocate), sequential scan per search, \
                exact last-component match (bench/peers/locate_baseline.c)"
        .to_string();
    Ok((info, vec![build, search]))
}

/// GNU locate (`frcode`) or plocate (`plocate-build -p`): the database built
/// from the path list and synced; each search a process of its own, for
/// the paths whose last component is exactly NAME. GNU locate: `-b '\NAME'`
/// (a pattern with a backslash is a glob, matched whole against the last
/// component). plocate matches a pattern without wildcards as a substring,
/// backslash or not (`\src4` finds `src46`), so it gets the glob `*/NAME`,
/// matched whole against the path.
fn tool(spec: &HeapSpec, inputs: &Inputs, plocate: bool) -> Result<(String, Vec<HeapPhase>)> {
    let db = spec.dir.join(if plocate { "plocate.db" } else { "locate.db" });
    let db_text = db.to_string_lossy().into_owned();
    let list = inputs.path_list.to_string_lossy().into_owned();
    let built = if plocate {
        // -l no: the paths are generated, not on this machine; no visibility checks.
        run_program(Path::new(PLOCATE_BUILD), &["-p", "-l", "no", &list, &db_text])?
    } else {
        run_program_to(Path::new(FRCODE), &[], Some(&inputs.path_list), Some(&db), &[0])?
    };
    let start = std::time::Instant::now();
    fsync(&db)?;
    let build_secs = built.secs + start.elapsed().as_secs_f64();
    let db_bytes = std::fs::metadata(&db).map(|m| m.len() as f64).unwrap_or(f64::NAN);
    let build_rss = child::children_max_rss_kib();
    let program = Path::new(if plocate { PLOCATE } else { GNU_LOCATE });
    let search_one = |name: &str| -> Result<(f64, u64, u64)> {
        let ran = if plocate {
            run_program_to(program, &["-d", &db_text, &format!("*/{name}")], None, None, &[0, 1])?
        } else {
            run_program_to(program, &["-d", &db_text, "-b", &format!("\\{name}")], None, None, &[0, 1])?
        };
        let mut matches = 0;
        let mut checksum = 0u64;
        for line in ran.stdout.lines().filter(|l| !l.is_empty()) {
            matches += 1;
            checksum = checksum.wrapping_add(path_checksum(line.as_bytes()));
        }
        Ok((ran.secs, matches, checksum))
    };
    // Warm the database and the program's own files.
    if let Some(first) = inputs.names.first() {
        search_one(first)?;
    }
    let (mut secs, mut matches, mut checksum) = (0.0, 0u64, 0u64);
    for name in &inputs.names {
        let (s, m, c) = search_one(name)?;
        secs += s;
        matches += m;
        checksum = checksum.wrapping_add(c);
    }
    let engine = if plocate { "plocate" } else { "locate" };
    inputs.check(engine, matches, checksum)?;
    let rss = child::children_max_rss_kib();
    let build = phase("build", inputs.entries, build_secs, build_rss, &[("db_bytes", db_bytes)]);
    let search = phase("fresh-search", inputs.names.len() as u64, secs, rss, &[("matches", matches as f64)]);
    let info = if plocate {
        format!(
            "plocate {} (plocate-build -p -l no; plocate -d DB '*/NAME', a process per search)",
            child::package_version("plocate")
        )
    } else {
        format!(
            "GNU findutils locate {} (frcode; locate.findutils -d DB -b '\\NAME', a process per search)",
            child::package_version("locate")
        )
    };
    Ok((info, vec![build, search]))
}
