//! `mltrace man`: one roff man page holding every subcommand.
//!
//! clap_mangen renders a page per command and points at `mltrace-record(1)`
//! and the like; one page is easier to install and read, so each
//! subcommand's synopsis, description and options become a subsection.

use std::io::{self, Write};

use anyhow::Context;
use clap::CommandFactory;
use clap_mangen::Man;

type Section = fn(&Man, &mut dyn Write) -> io::Result<()>;

/// A section rendered with a paragraph break for its `.SH` heading, to nest
/// it under another.
fn body(man: &Man, render: Section) -> io::Result<Vec<u8>> {
    let mut raw = Vec::new();
    render(man, &mut raw)?;
    let mut out = Vec::with_capacity(raw.len());
    for line in raw.split_inclusive(|&b| b == b'\n') {
        if line.starts_with(b".SH ") {
            out.extend_from_slice(b".PP\n");
        } else {
            out.extend_from_slice(line);
        }
    }
    Ok(out)
}

/// Text for roff: `-` is a minus sign to roff, and a leading `.` or `'` a request.
fn escape(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with(['.', '\'']) {
        format!("\\&{s}")
    } else {
        s
    }
}

/// The top-level long help, its table of outputs as tagged paragraphs
/// (clap_mangen would refill it into one run of text).
fn description(w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, ".SH DESCRIPTION")?;
    for line in crate::LONG_ABOUT.lines() {
        if line.is_empty() {
            writeln!(w, ".PP")?;
        } else if let Some(entry) = line.strip_prefix("  mltrace") {
            let (args, what) = entry.split_once("  ").unwrap_or((entry, ""));
            writeln!(w, ".TP\n\\fBmltrace{}\\fR\n{}", escape(args), escape(what.trim()))?;
        } else {
            writeln!(w, "{}", escape(line.trim()))?;
        }
    }
    Ok(())
}

pub fn render(w: &mut dyn Write) -> io::Result<()> {
    let mut cmd = crate::Cli::command();
    cmd.build();
    let top = Man::new(cmd.clone());
    top.render_title(w)?;
    top.render_name_section(w)?;
    top.render_synopsis_section(w)?;
    description(w)?;
    top.render_options_section(w)?;
    writeln!(w, ".SH COMMANDS")?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let man = Man::new(sub.clone());
        writeln!(w, ".SS \"mltrace {}\"", sub.get_name())?;
        w.write_all(&body(&man, Man::render_synopsis_section)?)?;
        w.write_all(&body(&man, Man::render_description_section)?)?;
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            w.write_all(&body(&man, Man::render_options_section)?)?;
        }
    }
    writeln!(w, ".SH \"SEE ALSO\"")?;
    writeln!(w, "The manual is the docs/ directory of mltrace's source, one page per topic.")?;
    top.render_version_section(w)
}

pub fn run() -> anyhow::Result<i32> {
    let mut out = io::stdout().lock();
    render(&mut out).context("writing the man page")?;
    Ok(0)
}
