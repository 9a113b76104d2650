//! Runs a [`Plan`]: the overview from the survey, then every detail file
//! (the whole run, a window, or the parts of a big run) in one more pass
//! over the log, switching files as the records pass each part's end.
//! Records are logged when they end, so a part may begin with a few
//! records that started just before it; each record is in exactly one part.

use std::io::{self, Read, Seek};
use std::path::PathBuf;

use mltrace_log::{LogError, LogReader};

use crate::encoder::Encoder;
use crate::overview;
use crate::plan::{FileRole, Plan, PlannedFile};
use crate::scene::{Scene, SceneStats};
use crate::survey::Survey;
use crate::window::Window;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("writing {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

/// Makes the encoder of each planned file.
pub trait Output {
    type E: Encoder;
    fn create(&mut self, file: &PlannedFile) -> io::Result<Self::E>;
    /// The file's encoder after its end (to close the file, or keep the writer).
    fn finished(&mut self, _enc: Self::E) -> io::Result<()> {
        Ok(())
    }
}

/// One file written.
#[derive(Clone, Debug)]
pub struct Written {
    pub file: PlannedFile,
    pub bytes: u64,
    pub stats: SceneStats,
}

/// Exports a whole log into one file whatever its size (what
/// `--no-split` does); `on_diag` hears what the reader worked around.
pub fn one_file<R: Read + Seek, O: Output>(
    reader: &mut LogReader<R>,
    out: &mut O,
    on_diag: &mut dyn FnMut(String),
) -> Result<Written, ExportError> {
    let survey = Survey::of(reader)?;
    for d in &survey.diagnostics {
        on_diag(d.clone());
    }
    let win = Window { filter: Default::default(), from: survey.start(), to: survey.end() + 1 };
    let file = PlannedFile {
        role: FileRole::Whole,
        path: Default::default(),
        from: win.from,
        to: win.to,
        label: "whole run".into(),
        weight: 0,
    };
    let plan = Plan { files: vec![file], warnings: vec![] };
    let mut written = run(reader, &survey, &win, &plan, out, &mut |_| {})?;
    Ok(written.remove(0))
}

/// `part 3 of 12: EPOCH 5-6`.
pub fn title(f: &PlannedFile) -> String {
    match f.role {
        FileRole::Whole => f.label.clone(),
        FileRole::Overview => "overview".into(),
        FileRole::Part { index, count } => format!("part {index} of {count}: {}", f.label),
    }
}

/// What a part holds (`EPOCH 2 (2/3)`); `None` for a whole file.
fn part_label(f: &PlannedFile) -> Option<&str> {
    matches!(f.role, FileRole::Part { .. }).then_some(f.label.as_str())
}

/// Writes every file of `plan`; `done` hears of each as it is finished.
pub fn run<R: Read + Seek, O: Output>(
    reader: &mut LogReader<R>,
    survey: &Survey,
    win: &Window,
    plan: &Plan,
    out: &mut O,
    done: &mut dyn FnMut(&Written),
) -> Result<Vec<Written>, ExportError> {
    let io_err = |f: &PlannedFile| {
        let path = f.path.clone();
        move |source| ExportError::Io { path, source }
    };
    let mut written = Vec::new();
    for f in plan.files.iter().filter(|f| f.role == FileRole::Overview) {
        let mut enc = out.create(f).map_err(io_err(f))?;
        let (bytes, stats) = overview::render(survey, &mut enc).map_err(io_err(f))?;
        out.finished(enc).map_err(io_err(f))?;
        let w = Written { file: f.clone(), bytes, stats };
        done(&w);
        written.push(w);
    }
    let details: Vec<&PlannedFile> = plan.files.iter().filter(|f| f.role != FileRole::Overview).collect();
    if details.is_empty() {
        return Ok(written);
    }
    reader.rewind();
    let mut scene = Scene::new(survey, win.filter.clone());
    let mut k = 0;
    let mut enc = out.create(details[0]).map_err(io_err(details[0]))?;
    let f = details[0];
    scene.begin_file(&mut enc, &title(f), (f.from, f.to), part_label(f)).map_err(io_err(f))?;
    // Ends file `k` and starts the next (or, after the last, only ends it).
    let mut next = |scene: &mut Scene<'_>, enc: O::E, k: usize, written: &mut Vec<Written>| {
        let mut enc = enc;
        let last = k + 1 == details.len();
        let (bytes, stats) = scene.end_file(&mut enc, last).map_err(io_err(details[k]))?;
        let w = Written { file: details[k].clone(), bytes, stats };
        let following = if last {
            out.finished(enc).map_err(io_err(details[k]))?;
            None
        } else {
            let f = details[k + 1];
            let mut e = out.create(f).map_err(io_err(f))?;
            out.finished(enc).map_err(io_err(details[k]))?;
            scene.begin_file(&mut e, &title(f), (f.from, f.to), part_label(f)).map_err(io_err(f))?;
            Some(e)
        };
        done(&w);
        written.push(w);
        Ok::<_, ExportError>(following)
    };
    let mut rec = mltrace_log::Record::Lost(Default::default());
    while let Some(mut frame) = reader.next_frame()? {
        while frame.next_into(&mut rec) {
            let ts = rec.ts();
            while k + 1 < details.len() && ts >= details[k].to {
                enc = next(&mut scene, enc, k, &mut written)?.expect("not the last file");
                k += 1;
            }
            if let Err(e) = scene.record(&mut enc, &frame, &rec) {
                return Err(io_err(details[k])(e));
            }
        }
    }
    // The files after the last record (if any), then the end.
    while let Some(e) = next(&mut scene, enc, k, &mut written)? {
        enc = e;
        k += 1;
    }
    Ok(written)
}
