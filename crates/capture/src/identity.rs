//! Who the traced command runs as. Under `sudo mltrace record`, the command
//! should run as the user who typed it (with their groups, HOME, USER), not
//! as root, and the log should belong to them: tracing needs privileges,
//! the training job does not.

use std::ffi::{CStr, CString};

use crate::launch::RunAs;

/// A user as the command will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
    pub groups: Vec<u32>,
}

impl User {
    pub fn run_as(&self) -> RunAs {
        RunAs { uid: self.uid, gid: self.gid, groups: self.groups.clone() }
    }
}

fn from_passwd(pw: &libc::passwd) -> User {
    // SAFETY: getpw* returned a valid entry whose strings are NUL-terminated.
    let (name, home) = unsafe {
        (
            CStr::from_ptr(pw.pw_name).to_string_lossy().into_owned(),
            CStr::from_ptr(pw.pw_dir).to_string_lossy().into_owned(),
        )
    };
    let cname = CString::new(name.clone()).unwrap_or_default();
    let mut groups = vec![0 as libc::gid_t; 64];
    let mut n = groups.len() as libc::c_int;
    // SAFETY: buffers sized as declared; retried once with the size asked for.
    unsafe {
        if libc::getgrouplist(cname.as_ptr(), pw.pw_gid, groups.as_mut_ptr(), &mut n) < 0 {
            groups.resize(n.max(0) as usize, 0);
            libc::getgrouplist(cname.as_ptr(), pw.pw_gid, groups.as_mut_ptr(), &mut n);
        }
    }
    groups.truncate(n.max(0) as usize);
    User { name, uid: pw.pw_uid, gid: pw.pw_gid, home, groups }
}

fn lookup(
    by: impl FnOnce(*mut libc::passwd, *mut libc::c_char, usize, *mut *mut libc::passwd) -> libc::c_int,
) -> Option<User> {
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    let r = by(&mut pw, buf.as_mut_ptr(), buf.len(), &mut out);
    if r != 0 || out.is_null() {
        return None;
    }
    Some(from_passwd(&pw))
}

pub fn by_name(name: &str) -> Option<User> {
    if let Ok(uid) = name.parse::<u32>() {
        return by_uid(uid);
    }
    let c = CString::new(name).ok()?;
    // SAFETY: getpwnam_r with valid buffers.
    lookup(|pw, buf, len, out| unsafe { libc::getpwnam_r(c.as_ptr(), pw, buf, len, out) })
}

pub fn by_uid(uid: u32) -> Option<User> {
    // SAFETY: getpwuid_r with valid buffers.
    lookup(|pw, buf, len, out| unsafe { libc::getpwuid_r(uid, pw, buf, len, out) })
}

/// The user behind `sudo` (SUDO_UID), when we are root because of it.
pub fn sudo_caller() -> Option<User> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let uid: u32 = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    if uid == 0 {
        return None;
    }
    by_uid(uid).or_else(|| {
        // A uid without a passwd entry: keep the ids sudo gave us.
        let gid = std::env::var("SUDO_GID").ok()?.parse().ok()?;
        Some(User { name: uid.to_string(), uid, gid, home: "/".into(), groups: vec![gid] })
    })
}

/// The environment for the command: ours, with the identity variables of
/// `user` (HOME, USER, LOGNAME) and without sudo's own.
pub fn environment(user: &User) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> =
        std::env::vars().filter(|(k, _)| !matches!(k.as_str(), "HOME" | "USER" | "LOGNAME" | "MAIL")).collect();
    env.push(("HOME".into(), user.home.clone()));
    env.push(("USER".into(), user.name.clone()));
    env.push(("LOGNAME".into(), user.name.clone()));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_nobody_resolve() {
        let root = by_name("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0));
        assert_eq!(by_uid(0).unwrap().name, "root");
        assert_eq!(by_name("0").unwrap().name, "root");
        assert!(by_name("no-such-user-mltrace").is_none());
        let env = environment(&root);
        assert_eq!(env.iter().filter(|(k, _)| k == "HOME").count(), 1);
    }
}
