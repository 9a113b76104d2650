//! `mltrace completions` and `mltrace man` produce what they promise, from
//! the real command definition (so a new subcommand or flag shows up).

use std::process::Command;

fn mltrace(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mltrace")).args(args).output().expect("run mltrace");
    assert!(out.status.success(), "mltrace {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 output")
}

#[test]
fn completion_scripts_name_commands_and_flags() {
    // fish names long flags as `-l parquet`.
    for (shell, parquet) in [("bash", "--parquet"), ("zsh", "--parquet"), ("fish", "-l parquet")] {
        let script = mltrace(&["completions", shell]);
        for word in ["record", parquet, "completions"] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
}

#[test]
fn completions_refuse_other_shells() {
    let out = Command::new(env!("CARGO_BIN_EXE_mltrace")).args(["completions", "elvish"]).output().unwrap();
    assert!(!out.status.success());
}

#[test]
fn man_page_holds_every_subcommand() {
    let page = mltrace(&["man"]);
    assert!(page.starts_with(".ie") || page.starts_with(".TH"), "not roff: {}", &page[..40.min(page.len())]);
    assert!(page.contains(".TH mltrace 1"));
    // roff escapes '-' as '\-'.
    for word in ["mltrace record", "mltrace export", "\\-\\-parquet", "\\-\\-json"] {
        assert!(page.contains(word), "man page lacks {word}");
    }
}

#[test]
fn help_lists_every_output() {
    let help = mltrace(&["--help"]);
    for output in
        ["Perfetto trace", "Chrome trace-event JSON", "Parquet tables", "HTML report", "JSON document", "merged log"]
    {
        assert!(help.contains(output), "mltrace --help does not mention {output}");
    }
    let export = mltrace(&["export", "--help"]);
    for flag in ["--perfetto", "--chrome", "--parquet"] {
        assert!(export.contains(flag), "mltrace export --help lacks {flag}");
    }
}
