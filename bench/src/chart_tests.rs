use super::*;

fn sample() -> ChartResults {
    ChartResults {
        format: FORMAT,
        suite: "objects".to_string(),
        title: "Larder objects vs peers".to_string(),
        date: "2026-11-25 18:16 UTC".to_string(),
        commit: "77705b6".to_string(),
        command: "larder-bench objects --runs 3".to_string(),
        source: String::new(),
        operations: vec![
            Operation::rates(
                "Durable 4 KiB puts, 1 writer",
                "puts/s",
                "larder",
                vec![("rocksdb".to_string(), 3728.0), ("larder".to_string(), 5146.0), ("fjall".to_string(), 4442.0)],
            ),
            Operation {
                name: "Space of 1M objects of 1 KiB".to_string(),
                unit: "allocated ÷ data".to_string(),
                higher_is_better: false,
                subject: "larder".to_string(),
                values: vec![
                    Value { engine: "larder".to_string(), value: 1.175 },
                    Value { engine: "ext4".to_string(), value: 4.02 },
                ],
            },
        ],
    }
}

/// A small well-formedness check of the XML subset the writer emits:
/// elements nest and close in order under one root, attribute values are
/// quoted, and `&` only starts one of the five predefined entities.
fn check_well_formed(xml: &str) -> Result<usize, String> {
    fn check_text(text: &str) -> Result<(), String> {
        if text.contains('>') {
            return Err(format!("raw '>' in text {text:?}"));
        }
        let mut rest = text;
        while let Some(i) = rest.find('&') {
            rest = &rest[i..];
            let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].iter().any(|e| rest.starts_with(e));
            if !ok {
                return Err(format!("bare '&' in {text:?}"));
            }
            rest = &rest[1..];
        }
        Ok(())
    }
    let mut stack: Vec<String> = Vec::new();
    let mut roots = 0;
    let mut elements = 0;
    let mut rest = xml;
    while let Some(open) = rest.find('<') {
        let text = &rest[..open];
        if stack.is_empty() && !text.trim().is_empty() {
            return Err(format!("text outside the root: {text:?}"));
        }
        check_text(text)?;
        let close = rest[open..].find('>').ok_or("unclosed tag")? + open;
        let tag = &rest[open + 1..close];
        rest = &rest[close + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(top) if top == name => continue,
                other => return Err(format!("</{name}> closes {other:?}")),
            }
        }
        let self_closing = tag.ends_with('/');
        let body = tag.trim_end_matches('/');
        let name: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(format!("bad element name in <{tag}>"));
        }
        // Attributes: name="value" pairs, values without '<' or '"'.
        let mut attrs = body[name.len()..].trim();
        while !attrs.is_empty() {
            let eq = attrs.find("=\"").ok_or(format!("unquoted attribute in <{tag}>"))?;
            let attr = &attrs[..eq];
            if attr.is_empty() || !attr.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':') {
                return Err(format!("bad attribute name {attr:?}"));
            }
            let end = attrs[eq + 2..].find('"').ok_or("unterminated attribute value")? + eq + 2;
            let value = &attrs[eq + 2..end];
            if value.contains('<') {
                return Err(format!("'<' in attribute value {value:?}"));
            }
            check_text(value)?;
            attrs = attrs[end + 1..].trim_start();
        }
        if stack.is_empty() {
            roots += 1;
        }
        elements += 1;
        if !self_closing {
            stack.push(name);
        }
    }
    if !rest.trim().is_empty() {
        return Err(format!("text after the root: {rest:?}"));
    }
    match (stack.is_empty(), roots) {
        (true, 1) => Ok(elements),
        (false, _) => Err(format!("unclosed elements {stack:?}")),
        (true, n) => Err(format!("{n} root elements")),
    }
}

/// The `width` of every bar, in drawing order.
fn bar_widths(svg: &str) -> Vec<f64> {
    svg.lines()
        .filter(|l| l.contains("class=\"bar\""))
        .map(|l| {
            let start = l.find("width=\"").map(|i| i + 7).unwrap_or(0);
            let end = l[start..].find('"').map_or(l.len(), |e| start + e);
            l[start..end].parse::<f64>().unwrap_or(f64::NAN)
        })
        .collect()
}

#[test]
fn the_checker_rejects_what_is_not_well_formed() {
    assert!(check_well_formed("<svg><rect/></svg>").is_ok());
    assert!(check_well_formed("<svg><text>a</svg>").is_err());
    assert!(check_well_formed("<svg><text>a & b</text></svg>").is_err());
    assert!(check_well_formed("<svg><text x=1>a</text></svg>").is_err());
    assert!(check_well_formed("<svg/><svg/>").is_err());
    assert!(check_well_formed("<svg><text>a < b</text></svg>").is_err());
}

#[test]
fn the_svg_is_well_formed_xml_with_one_bar_per_figure() {
    let results = sample();
    let svg = render_svg(&results);
    let elements = check_well_formed(&svg).map_err(|e| format!("{e}\n{svg}"));
    assert!(elements.is_ok(), "{elements:?}");
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_eq!(bar_widths(&svg).len(), 5);
}

#[test]
fn bar_lengths_are_proportional_to_the_figures_within_an_operation() {
    let svg = render_svg(&sample());
    let widths = bar_widths(&svg);
    // Drawn subject first: larder 5146, rocksdb 3728, fjall 4442; then larder 1.175, ext4 4.02.
    let puts = [5146.0, 3728.0, 4442.0];
    for (w, v) in widths[..3].iter().zip(puts) {
        assert!((w - v / 5146.0 * BAR_MAX).abs() < 0.01, "width {w} for {v}");
    }
    assert!((widths[0] - BAR_MAX).abs() < 0.01, "the largest figure gets the longest bar");
    assert!((widths[3] / widths[4] - 1.175 / 4.02).abs() < 1e-4);
    assert!((widths[4] - BAR_MAX).abs() < 0.01);
}

#[test]
fn labels_carry_the_figures_and_larders_ratio() {
    let svg = render_svg(&sample());
    assert!(svg.contains("5,146 puts/s<"), "{svg}");
    assert!(svg.contains("3,728 puts/s — larder ÷ rocksdb: 1.38x"), "{svg}");
    // Less is better: the ratio is the peer's figure over Larder's.
    assert!(svg.contains("4.020 allocated ÷ data — larder ÷ ext4: 3.42x"), "{svg}");
    assert!(svg.contains("commit 77705b6, 2026-11-25 18:16 UTC"), "{svg}");
}

#[test]
fn labels_are_escaped() {
    let mut results = sample();
    results.title = "a <b> & \"c\" 'd'".to_string();
    results.operations[0].values[0].engine = "<script>&x".to_string();
    results.operations[0].name = "puts > gets & more".to_string();
    let svg = render_svg(&results);
    assert!(check_well_formed(&svg).is_ok(), "{svg}");
    assert!(!svg.contains("<script>"));
    assert!(!svg.contains("<b>"));
    assert!(svg.contains("&lt;script&gt;&amp;x"));
    assert!(svg.contains("a &lt;b&gt; &amp; &quot;c&quot; &apos;d&apos;"));
    assert!(svg.contains("puts &gt; gets &amp; more"));
    assert_eq!(escape("tab\tand\u{1}bell"), "tab\tand bell");
}

#[test]
fn validate_refuses_what_cannot_be_drawn() {
    assert!(sample().validate().is_ok());
    let mut bad = sample();
    bad.operations[0].values[0].value = f64::NAN;
    assert!(bad.validate().is_err());
    let mut bad = sample();
    bad.operations[1].values[1].value = -1.0;
    assert!(bad.validate().is_err());
    let mut bad = sample();
    bad.format = FORMAT + 1;
    assert!(bad.validate().is_err());
    let mut bad = sample();
    bad.suite = "../objects".to_string();
    assert!(bad.validate().is_err());
    let mut bad = sample();
    bad.operations.iter_mut().for_each(|o| o.values.clear());
    assert!(bad.validate().is_err());
}

#[test]
fn results_files_round_trip_and_default_to_more_is_better() {
    let results = sample();
    let text = serde_json::to_string(&results).map_err(|e| e.to_string());
    let back: Result<ChartResults, String> = text.and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()));
    assert_eq!(back, Ok(results));
    let minimal = r#"{"format":1,"suite":"fs","title":"t","date":"d","commit":"c","command":"x",
        "operations":[{"name":"create","unit":"ops/s","subject":"larder",
        "values":[{"engine":"larder","value":2},{"engine":"ext4","value":1}]}]}"#;
    let parsed: Result<ChartResults, String> = serde_json::from_str(minimal).map_err(|e| e.to_string());
    let parsed = parsed.as_ref().map(|p| (p.operations[0].higher_is_better, p.source.clone()));
    assert_eq!(parsed, Ok((true, String::new())));
}

#[test]
fn write_outputs_writes_the_report_results_and_chart() {
    let dir = std::env::temp_dir().join(format!("larder-bench-chart-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let written = write_outputs(&dir, "# report\n", &sample()).map_err(|e| e.to_string());
    let names: Result<Vec<String>, String> =
        written.map(|w| w.iter().filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())).collect());
    assert_eq!(names, Ok(vec!["objects.md".to_string(), "objects.json".to_string(), "objects.svg".to_string()]));
    let reread = ChartResults::read(&dir.join("objects.json")).map_err(|e| e.to_string());
    assert_eq!(reread, Ok(sample()));
    let svg = std::fs::read_to_string(dir.join("objects.svg")).unwrap_or_default();
    assert_eq!(svg, render_svg(&sample()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn long_titles_wrap_and_the_picture_widens_for_long_labels() {
    assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
    assert_eq!(wrap("abcdefgh ij", 4), vec!["abcdefgh", "ij"]);
    let mut results = sample();
    results.title = "word ".repeat(60);
    let svg = render_svg(&results);
    assert!(svg.matches("font-size=\"15\"").count() >= 2, "{svg}");
    let width = |svg: &str| -> f64 {
        let start = svg.find("width=\"").map_or(0, |i| i + 7);
        svg[start..].split('"').next().and_then(|w| w.parse().ok()).unwrap_or(0.0)
    };
    let narrow = width(&svg);
    results.operations[0].values[1].engine = "an engine with a very long name indeed".repeat(3);
    assert!(width(&render_svg(&results)) > narrow);
}
