//! A suite's results as a chart: the results file every suite writes next
//! to its report (`<suite>.json`, [`ChartResults`]) and the SVG drawn from
//! it (`<suite>.svg`): per operation, one horizontal bar per engine, Larder's
//! first, each labelled with its figure and Larder's ratio to it.
//!
//! The SVG is written by hand (rectangles and text, no scripts, no external
//! fonts), so the bench needs no plotting library and the chart renders in
//! any browser and on GitHub.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The version of the results file's format written in [`ChartResults::format`].
pub const FORMAT: u32 = 1;

/// One run of one suite, as charts and the standing table read it. This is
/// the JSON of `<suite>.json` (docs in BENCHMARKS.md, "Results files").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChartResults {
    /// [`FORMAT`]; a reader refuses any other.
    pub format: u32,
    /// The suite (`index`, `objects`, `fs`, `server`, or a part of one such
    /// as `index-scans`): the file names are `<suite>.json` and `<suite>.svg`.
    pub suite: String,
    /// The chart's title, before the commit and date.
    pub title: String,
    /// When the run started, UTC.
    pub date: String,
    /// The commit the bench binary was built from.
    pub commit: String,
    /// The command that ran the suite.
    pub command: String,
    /// Where the figures were recorded when they were not written by the
    /// suite itself (a BENCHMARKS.md history file); empty otherwise.
    #[serde(default)]
    pub source: String,
    /// The operations, in the order they are drawn.
    pub operations: Vec<Operation>,
}

/// One operation (a workload of the suite): every engine's median figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    /// What was timed, e.g. "Durable 4 KiB puts, 1 writer".
    pub name: String,
    /// The unit of the figures, e.g. "puts/s".
    pub unit: String,
    /// False for figures where less is better (bytes per data byte); ratios
    /// are then the peer's figure over Larder's.
    #[serde(default = "higher_is_better_by_default")]
    pub higher_is_better: bool,
    /// The engine that is Larder in this operation (`larder`, `served`, ...):
    /// the ratios are its figure against each other engine's.
    pub subject: String,
    /// Each engine's median figure; the subject's among them.
    pub values: Vec<Value>,
}

fn higher_is_better_by_default() -> bool {
    true
}

/// One engine's median figure for an operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Value {
    /// The engine (or ceiling) as the suite names it.
    pub engine: String,
    /// Its median figure, in the operation's unit; finite and not negative.
    pub value: f64,
}

impl Operation {
    /// An operation whose figures are rates (more is better).
    pub fn rates(name: &str, unit: &str, subject: &str, values: Vec<(String, f64)>) -> Operation {
        Operation {
            name: name.to_string(),
            unit: unit.to_string(),
            higher_is_better: true,
            subject: subject.to_string(),
            values: values.into_iter().map(|(engine, value)| Value { engine, value }).collect(),
        }
    }

    /// The subject's figure.
    fn subject_value(&self) -> Option<f64> {
        self.values.iter().find(|v| v.engine == self.subject).map(|v| v.value)
    }

    /// Larder's ratio against `value` (above 1: Larder better), or `None`
    /// when the subject has no figure or a division has no meaning.
    pub fn ratio_against(&self, value: f64) -> Option<f64> {
        let subject = self.subject_value()?;
        let (numerator, denominator) = if self.higher_is_better { (subject, value) } else { (value, subject) };
        (denominator > 0.0).then(|| numerator / denominator)
    }
}

impl ChartResults {
    /// Checks what a chart needs: the format version, at least one
    /// operation with figures, every figure finite and not negative.
    pub fn validate(&self) -> Result<()> {
        if self.format != FORMAT {
            bail!("results format {} (this bench reads {FORMAT})", self.format);
        }
        if self.suite.is_empty() || !self.suite.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            bail!("suite {:?}: letters, digits, '-' and '_' only (it names the files)", self.suite);
        }
        if self.operations.iter().all(|o| o.values.is_empty()) {
            bail!("suite {}: no figures to draw", self.suite);
        }
        for operation in &self.operations {
            for v in &operation.values {
                if !v.value.is_finite() || v.value < 0.0 {
                    bail!("{} / {}: figure {} is not a finite, non-negative number", operation.name, v.engine, v.value);
                }
            }
        }
        Ok(())
    }

    /// Reads and checks a results file.
    pub fn read(path: &Path) -> Result<ChartResults> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let results: ChartResults =
            serde_json::from_str(&text).with_context(|| format!("parsing {} as bench results", path.display()))?;
        results.validate().with_context(|| format!("checking {}", path.display()))?;
        Ok(results)
    }
}

/// Writes `<suite>.md` (the report), `<suite>.json` and `<suite>.svg` into
/// `dir` (made if missing); returns the paths written.
pub fn write_outputs(dir: &Path, report: &str, results: &ChartResults) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let markdown = dir.join(format!("{}.md", results.suite));
    std::fs::write(&markdown, report).with_context(|| format!("writing {}", markdown.display()))?;
    written.push(markdown);
    let json = dir.join(format!("{}.json", results.suite));
    let text = serde_json::to_string_pretty(results)?;
    std::fs::write(&json, text + "\n").with_context(|| format!("writing {}", json.display()))?;
    written.push(json);
    if results.validate().is_ok() {
        written.push(write_svg(dir, results)?);
    } else {
        // A run whose every child failed still leaves its report and results.
        eprintln!("no chart: the run produced no figures to draw");
    }
    Ok(written)
}

/// Writes `<suite>.svg` into `dir`; returns its path.
pub fn write_svg(dir: &Path, results: &ChartResults) -> Result<PathBuf> {
    results.validate()?;
    let path = dir.join(format!("{}.svg", results.suite));
    std::fs::write(&path, render_svg(results)).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The `chart` subcommand: an SVG for each results file, into `out`.
pub fn run(inputs: &[PathBuf], out: &Path) -> Result<()> {
    if inputs.is_empty() {
        bail!("name at least one results file (<suite>.json)");
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for input in inputs {
        let results = ChartResults::read(input)?;
        let path = write_svg(out, &results)?;
        eprintln!("{} -> {}", input.display(), path.display());
    }
    Ok(())
}

/// The longest bar: an operation's largest figure.
pub const BAR_MAX: f64 = 420.0;
/// Height of a bar's row, px.
const ROW: f64 = 20.0;
/// Height of an operation's heading, px.
const HEADING: f64 = 26.0;
/// Height of a line of the title and of the subtitle, px.
const TITLE_LINE: f64 = 19.0;
const SUBTITLE_LINE: f64 = 15.0;
/// Rough advance of a character at 12 px (labels) and 15 px (title) in a
/// sans-serif font: enough to keep text inside the picture.
const CHAR_WIDTH: f64 = 7.0;
const TITLE_CHAR_WIDTH: f64 = 8.5;
/// Narrowest picture, px.
const MIN_WIDTH: f64 = 760.0;

/// `text` cut at spaces into lines of at most `width` characters (a word
/// longer than that gets a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// XML text with `&`, `<`, `>`, `"` and `'` escaped (safe in text and in
/// attribute values).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters even escaped.
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A figure for a label: thousands separated above 100, else 3 significant digits.
fn figure(value: f64) -> String {
    if value >= 100.0 {
        crate::report::thousands(value)
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

/// The label after a bar: the figure, and for a peer Larder's ratio to it.
fn bar_label(operation: &Operation, v: &Value) -> String {
    let mut label = format!("{} {}", figure(v.value), operation.unit);
    if v.engine != operation.subject {
        match operation.ratio_against(v.value) {
            Some(r) => {
                let _ = write!(label, " — {} ÷ {}: {r:.2}x", operation.subject, v.engine);
            }
            None => label.push_str(" — no ratio"),
        }
    }
    label
}

/// The SVG of `results` (call [`ChartResults::validate`] first: figures
/// that are not finite are drawn as empty bars).
pub fn render_svg(results: &ChartResults) -> String {
    let chars = |t: &str| t.chars().count() as f64;
    let longest_engine =
        results.operations.iter().flat_map(|o| &o.values).map(|v| chars(&v.engine)).fold(6.0, f64::max);
    let bar_left = 16.0 + longest_engine * CHAR_WIDTH;
    let longest_label = results
        .operations
        .iter()
        .flat_map(|o| o.values.iter().map(move |v| chars(&bar_label(o, v))))
        .fold(0.0, f64::max);
    let width = (bar_left + BAR_MAX + 12.0 + longest_label * CHAR_WIDTH).max(MIN_WIDTH).ceil();
    let title = format!("{} — commit {}, {}", results.title, results.commit, results.date);
    let title_lines = wrap(&title, ((width - 20.0) / TITLE_CHAR_WIDTH) as usize);
    let subtitle = format!(
        "Median of the rounds. Blue: Larder. Each label: the figure, then Larder's ratio to that engine \
         (above 1: Larder better). {}",
        if results.source.is_empty() { results.command.clone() } else { format!("Figures from {}", results.source) }
    );
    let subtitle_lines = wrap(&subtitle, ((width - 20.0) / (CHAR_WIDTH * 0.85)) as usize);
    let top = 8.0 + title_lines.len() as f64 * TITLE_LINE + subtitle_lines.len() as f64 * SUBTITLE_LINE;
    let rows: usize = results.operations.iter().map(|o| o.values.len()).sum();
    let height = (top + results.operations.len() as f64 * HEADING + rows as f64 * ROW + 16.0).ceil();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(o, "<title>{}</title>", escape(&title));
    let _ = writeln!(o, "<rect x=\"0\" y=\"0\" width=\"{width}\" height=\"{height}\" fill=\"#ffffff\"/>");
    let mut y = 4.0;
    for line in &title_lines {
        y += TITLE_LINE;
        let _ =
            writeln!(o, "<text x=\"10\" y=\"{y:.1}\" font-size=\"15\" font-weight=\"bold\">{}</text>", escape(line));
    }
    for line in &subtitle_lines {
        y += SUBTITLE_LINE;
        let _ = writeln!(o, "<text x=\"10\" y=\"{y:.1}\" font-size=\"11\" fill=\"#4a5568\">{}</text>", escape(line));
    }
    let mut y = top;
    for operation in &results.operations {
        let heading = format!(
            "{} ({}{})",
            operation.name,
            operation.unit,
            if operation.higher_is_better { ", more is better" } else { ", less is better" }
        );
        let _ = writeln!(o, "<text x=\"10\" y=\"{:.1}\" font-weight=\"bold\">{}</text>", y + 18.0, escape(&heading));
        y += HEADING;
        let max = operation.values.iter().map(|v| v.value).filter(|v| v.is_finite()).fold(0.0, f64::max);
        // The subject first, the others in the order given.
        let mut ordered: Vec<&Value> = operation.values.iter().filter(|v| v.engine == operation.subject).collect();
        ordered.extend(operation.values.iter().filter(|v| v.engine != operation.subject));
        for v in ordered {
            let length = if max > 0.0 && v.value.is_finite() { v.value / max * BAR_MAX } else { 0.0 };
            let fill = if v.engine == operation.subject { "#2b6cb0" } else { "#a0aec0" };
            let _ = writeln!(
                o,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                bar_left - 6.0,
                y + 14.0,
                escape(&v.engine)
            );
            let _ = writeln!(
                o,
                "<rect class=\"bar\" x=\"{bar_left:.1}\" y=\"{:.1}\" width=\"{length:.3}\" height=\"{:.1}\" fill=\"{fill}\"/>",
                y + 3.0,
                ROW - 6.0
            );
            let _ = writeln!(
                o,
                "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                bar_left + length + 6.0,
                y + 14.0,
                escape(&bar_label(operation, v))
            );
            y += ROW;
        }
    }
    let _ = writeln!(o, "</svg>");
    o
}

#[cfg(test)]
#[path = "chart_tests.rs"]
mod tests;
