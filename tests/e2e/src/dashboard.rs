//! The chart's dashboard and alerts against what an adapter exports: every metric they query
//! must be one an adapter's `/metrics` declares, or a panel stays empty and an alert never
//! fires.

use std::collections::BTreeSet;
use std::fs;

use anyhow::{Context as _, Result, ensure};
use serde_json::Value;

/// The metric names a query uses: every `tandem_...` identifier in it.
fn metrics_in(query: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = query;
    while let Some(at) = rest.find("tandem_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.insert(name);
    }
    names
}

/// The sample names a Prometheus exposition declares: a counter `x` has `x_total`, a histogram
/// `x_bucket`, `x_sum` and `x_count`, a gauge `x` (from its `# TYPE` line, whether or not a
/// labelled family has a sample yet).
fn exported(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        match kind {
            "counter" => {
                names.insert(format!("{}_total", name.trim_end_matches("_total")));
            }
            "histogram" => {
                for suffix in ["bucket", "sum", "count"] {
                    names.insert(format!("{name}_{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// Checks that every metric the dashboard and the alerts query is one `scrape` (an adapter's
/// `/metrics`) declares. The declaring scenario calls it once its adapter has decided, refused
/// and learned a memory peak, so that the labelled families have their first series.
pub fn check_dashboard_queries(scrape: &str) -> Result<()> {
    let root = crate::root().join(tandem_xtask::helm::CHART_DIR);
    let dashboard: Value =
        serde_json::from_str(&fs::read_to_string(root.join("files/dashboard.json"))?)?;
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().context("no panels")? {
        for target in panel["targets"].as_array().into_iter().flatten() {
            queries.push((
                format!("panel {}", panel["title"]),
                target["expr"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    let rules = fs::read_to_string(root.join("templates/monitoring.yaml"))?;
    for line in rules.lines() {
        if let Some(expr) = line.trim().strip_prefix("expr: ") {
            queries.push(("alert".into(), expr.to_owned()));
        }
    }
    ensure!(queries.len() > 20, "only {} queries found", queries.len());
    let exported = exported(scrape);
    let mut missing = Vec::new();
    for (source, query) in &queries {
        let names = metrics_in(query);
        ensure!(
            !names.is_empty(),
            "{source} queries no tandem metric: {query}"
        );
        for name in names {
            if !exported.contains(&name) {
                missing.push(format!("{source}: {name}"));
            }
        }
    }
    ensure!(
        missing.is_empty(),
        "queried but not exported by the extender:\n{}\n(exported: {exported:?})",
        missing.join("\n")
    );
    println!(
        "(dashboard) {} queries of the dashboard and the alerts, every metric exported",
        queries.len()
    );
    Ok(())
}
