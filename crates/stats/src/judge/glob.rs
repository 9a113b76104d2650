//! One short name for the files a set of processes read: the file itself,
//! or their common directory and a pattern (`/data/train/*.npz`,
//! `/data/**/*.npz` when they sit in subdirectories), for the verdict's
//! sentence.

/// The largest files (by bytes) that together hold this share of all
/// bytes are the ones named.
const COVER: f64 = 0.9;
/// At most this many files are looked at to name them (the largest).
const MAX_FILES: usize = 4096;

/// Code a worker loads, not data it reads: Python sources and bytecode
/// (a forked worker reads `dataloader.py` for its tracebacks and
/// warnings), shared libraries, and the kernel's own files. Named among
/// the rest, they made the sentence read "reads of /**/*" for a job whose
/// workers read no file at all.
fn is_code(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".py")
        || name.ends_with(".pyc")
        || name.ends_with(".so")
        || name.contains(".so.")
        || ["/proc/", "/sys/", "/dev/"].iter().any(|d| path.starts_with(d))
}

/// `files`: (path, bytes read). Returns the pattern and the share of all
/// bytes the files it names hold; `None` when no data file was read
/// (code files, [`is_code`], are not named).
pub fn name_files(files: &[(&str, u64)]) -> Option<(String, f64)> {
    let total: u64 = files.iter().map(|f| f.1).sum();
    if total == 0 {
        return None;
    }
    let mut v: Vec<&(&str, u64)> = files.iter().filter(|f| f.1 > 0 && !is_code(f.0)).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut top = Vec::new();
    let mut sum = 0u64;
    for f in v.into_iter().take(MAX_FILES) {
        top.push(f.0);
        sum += f.1;
        if sum as f64 >= COVER * total as f64 {
            break;
        }
    }
    Some((pattern(&top), sum as f64 / total as f64))
}

fn dir_of(p: &str) -> &str {
    p.rsplit_once('/').map_or("", |(d, _)| d)
}

/// `paths` (at least one) as one path or `dir/*.ext`, `dir/**/*.ext`, `dir/*`.
pub fn pattern(paths: &[&str]) -> String {
    match paths {
        [] => return String::new(),
        [one] => return one.to_string(),
        _ => {}
    }
    // The longest common directory, component by component.
    let mut common: Vec<&str> = dir_of(paths[0]).split('/').collect();
    for p in &paths[1..] {
        let parts: Vec<&str> = dir_of(p).split('/').collect();
        let n = common.iter().zip(&parts).take_while(|(a, b)| a == b).count();
        common.truncate(n);
    }
    let dir = common.join("/");
    let nested = paths.iter().any(|p| dir_of(p) != dir);
    let ext = |p: &str| {
        let name = p.rsplit('/').next().unwrap_or(p);
        name.rsplit_once('.').filter(|(stem, _)| !stem.is_empty()).map(|(_, e)| e.to_string())
    };
    let first = ext(paths[0]);
    let same_ext = first.is_some() && paths.iter().all(|p| ext(p) == first);
    let leaf = match (same_ext, first) {
        (true, Some(e)) => format!("*.{e}"),
        _ => "*".to_string(),
    };
    let sub = if nested { "**/" } else { "" };
    format!("{dir}/{sub}{leaf}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(pattern(&["/data/a.npz"]), "/data/a.npz");
        assert_eq!(pattern(&["/data/train/a.npz", "/data/train/b.npz"]), "/data/train/*.npz");
        assert_eq!(pattern(&["/data/train/x/a.npz", "/data/train/b.npz"]), "/data/train/**/*.npz");
        assert_eq!(pattern(&["/data/a.npz", "/data/b.bin"]), "/data/*");
        assert_eq!(pattern(&["/a/x.bin", "/b/y.bin"]), "/**/*.bin");
    }

    #[test]
    fn code_is_not_named_as_what_workers_read() {
        let py = "/venv/lib/python3.12/site-packages/torch/utils/data/dataloader.py";
        let so = "/venv/lib/python3.12/site-packages/numpy/random/mtrand.cpython-312-x86_64-linux-gnu.so";
        assert_eq!(name_files(&[(py, 50_000), (so, 3_000), ("/usr/lib/libz.so.1", 832)]), None);
        // Beside data, they are left out of the name but count in the share.
        let (name, share) = name_files(&[(py, 10), ("/data/a.npz", 60), ("/data/b.npz", 30)]).unwrap();
        assert_eq!(name, "/data/*.npz");
        assert!((share - 0.9).abs() < 1e-9, "{share}");
        assert_eq!(pattern(&["/d/.hidden", "/d/.other"]), "/d/*");
    }

    #[test]
    fn the_largest_files_that_hold_most_bytes() {
        let files = [("/d/a.npz", 50), ("/d/b.npz", 45), ("/lib/x.so", 5)];
        let (p, share) = name_files(&files).unwrap();
        assert_eq!(p, "/d/*.npz");
        assert!((share - 0.95).abs() < 1e-9);
        assert_eq!(name_files(&[("/x", 0)]), None);
        assert_eq!(name_files(&[]), None);
    }
}
