//! The bench's files: `report.json`, `report.md` and the charts at the
//! end, `report.partial.json` while it runs.

use crate::report::{markdown, summary, Report};
use crate::BenchError;
use std::path::Path;

/// Writes `report.partial.json`: the runs so far of a bench still going
/// (a run of hours that is stopped keeps what it measured). `write_all`
/// removes it.
pub fn write_partial(r: &Report, out: &Path) -> Result<(), BenchError> {
    let path = out.join("report.partial.json");
    let tmp = out.join("report.partial.json.tmp");
    std::fs::write(&tmp, serde_json::to_string(r)?).map_err(|e| BenchError::Io(tmp.clone(), e))?;
    std::fs::rename(&tmp, &path).map_err(|e| BenchError::Io(path, e))
}

/// Writes report.json, report.md and the charts into `out`; prints the summary.
pub fn write_all(r: &Report, out: &Path) -> Result<(), BenchError> {
    let _ = std::fs::remove_file(out.join("report.partial.json"));
    let io = |p: &Path, e| BenchError::Io(p.to_path_buf(), e);
    let json = out.join("report.json");
    std::fs::write(&json, serde_json::to_string_pretty(r)?).map_err(|e| io(&json, e))?;
    let charts = match crate::charts::write_all(r, out) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("warning: charts not written: {e}");
            Vec::new()
        }
    };
    let md = out.join("report.md");
    std::fs::write(&md, markdown(r, &charts)).map_err(|e| io(&md, e))?;
    println!("{}", summary(r));
    println!(
        "wrote {}/report.json, report.md and {} charts (PNG + SVG)",
        out.display(),
        charts.len()
    );
    Ok(())
}
