//! What the training examples share: the loss log, written as CSV and as a
//! PNG plot (plotters, bitmap backend, with a bundled DejaVu Sans Mono so
//! no system font is needed), atomic file writes, and reading training checkpoints back.

#![allow(dead_code)] // each example uses the part it needs

pub mod amp;
pub mod plan;
pub mod profile;
pub mod report;

use std::path::Path;

use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

/// One series of (x, y) points with a name (`train`, `test`, ...).
pub struct Series {
    /// The legend's label and the CSV's column value.
    pub name: String,
    /// The points, in order.
    pub points: Vec<(f64, f64)>,
}

/// Loss curves collected during training.
#[derive(Default)]
pub struct LossLog {
    series: Vec<Series>,
}

impl LossLog {
    /// Appends a point to the series `name` (created on first use).
    pub fn push(&mut self, name: &str, x: f64, y: f64) {
        match self.series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((x, y)),
            None => self.series.push(Series {
                name: name.to_string(),
                points: vec![(x, y)],
            }),
        }
    }

    /// The CSV text: `series,x,y` rows.
    pub fn csv(&self, x_name: &str) -> String {
        let mut out = format!("series,{x_name},loss\n");
        for s in &self.series {
            for (x, y) in &s.points {
                out.push_str(&format!("{},{x},{y}\n", s.name));
            }
        }
        out
    }

    /// Writes the CSV to `path` (atomically).
    pub fn write_csv(&self, path: &Path, x_name: &str) -> std::io::Result<()> {
        write_atomic(path, self.csv(x_name).as_bytes())
    }

    /// Plots every series as a line and writes
    /// the PNG to `path` (atomically).
    pub fn write_png(&self, path: &Path, title: &str, x_name: &str) -> Result<(), Box<dyn std::error::Error>> {
        static FONT: &[u8] = include_bytes!("assets/DejaVuSansMono.ttf");
        // Registering twice replaces the same font: harmless.
        register_font("sans-serif", FontStyle::Normal, FONT).map_err(|_| "the bundled font does not load")?;
        let all = || self.series.iter().flat_map(|s| s.points.iter().copied());
        let (x_max, y_min, y_max) = all().fold((1.0f64, f64::INFINITY, 0.0f64), |(a, b, c), (x, y)| {
            (a.max(x), if y > 0.0 { b.min(y) } else { b }, c.max(y))
        });
        if !y_min.is_finite() || y_max <= 0.0 {
            return Err("nothing to plot: no positive loss values".into());
        }
        // Drawn to a temporary file (its name ends in .png: the encoder
        // goes by the extension), then renamed over `path`.
        let tmp = temp_path(path, ".png");
        {
            let root = BitMapBackend::new(&tmp, (900, 540)).into_drawing_area();
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 22))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(64)
                .build_cartesian_2d(0f64..x_max, y_min * 0.9..y_max * 1.05)?;
            chart
                .configure_mesh()
                .light_line_style(WHITE)
                .x_desc(x_name)
                .y_desc("loss")
                .label_style(("sans-serif", 14))
                .draw()?;
            for (i, s) in self.series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))?
                    .label(s.name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 14))
                .draw()?;
            root.present()?;
        }
        std::fs::rename(&tmp, path)?;
        Ok(())
    }
}

/// Writes `bytes` to `path` through a temporary file in the same folder
/// and a rename, so a reader never sees a half-written file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temp_path(path, "");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// A temporary name beside `path` (its folder created), ending in `suffix`.
fn temp_path(path: &Path, suffix: &str) -> std::path::PathBuf {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // A failure to create the folder shows in the write that follows.
    let _ = std::fs::create_dir_all(dir);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    dir.join(format!(".{name}.tmp{}{suffix}", std::process::id()))
}

/// A training checkpoint an example wrote, read back: its entries by name,
/// with errors naming the file and the entry.
pub struct Checkpoint {
    path: std::path::PathBuf,
    dict: ferrotorch::serialize::Dict,
}

impl Checkpoint {
    /// Loads `path` and checks that its entry `key` equals `signature` (the
    /// flags the run must share); otherwise an error showing the file's
    /// flags and telling to resume with `same_flags`.
    pub fn load(
        path: &Path,
        key: &str,
        signature: ferrotorch::serialize::Dict,
        same_flags: &str,
    ) -> Result<Checkpoint, Box<dyn std::error::Error>> {
        use ferrotorch::serialize::Value;
        let Value::Dict(dict) = ferrotorch::serialize::load(path)? else {
            return Err("the checkpoint is not a dict".into());
        };
        let ckpt = Checkpoint {
            path: path.to_path_buf(),
            dict,
        };
        let written = ckpt.get(key)?;
        if !written.same(&Value::Dict(signature)) {
            return Err(format!(
                "{} was written by a run with other flags ({written:?}); resume with the same {same_flags}",
                path.display()
            )
            .into());
        }
        Ok(ckpt)
    }

    /// The entry `k`.
    pub fn get(&self, k: &str) -> Result<&ferrotorch::serialize::Value, String> {
        self.dict
            .get_str(k)
            .ok_or_else(|| format!("{}: the checkpoint has no '{k}'", self.path.display()))
    }

    /// The entry `k`, a non-negative int.
    pub fn int(&self, k: &str) -> Result<usize, Box<dyn std::error::Error>> {
        let v = self.get(k)?.as_i64().ok_or_else(|| format!("'{k}' is not an int"))?;
        Ok(usize::try_from(v)?)
    }

    /// The entry `k`, a tensor.
    pub fn tensor(&self, k: &str) -> Result<&ferrotorch::Tensor, String> {
        self.get(k)?.as_tensor().ok_or_else(|| format!("'{k}' is not a tensor"))
    }
}
