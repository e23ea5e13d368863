//! Local state is private to the service user: the SQLite database holds the
//! issuer's signing key, refresh tokens and conversations, and
//! `dev-credentials.json` every demo password and client secret. What maitred
//! creates is 0700 (directories) and 0600 (files); an existing wider one is
//! reported at start-up with the `chmod` that fixes it, and left as it is, since an
//! operator may have reasons (a group-readable backup directory) we cannot see.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Creates `dir` and any missing parents, private to the user.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Creates an empty file private to the user, unless it exists (then it is untouched).
pub fn create_private_file(path: &Path) -> io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error),
    }
}

/// What to tell the operator when `path` exists and others may read it, or `None`.
#[cfg(unix)]
pub fn shared_warning(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let metadata = std::fs::metadata(path).ok()?;
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o077 == 0 {
        return None;
    }
    let (kind, private) = if metadata.is_dir() {
        ("directory", "700")
    } else {
        ("file", "600")
    };
    Some(format!(
        "{} is a {kind} with mode {mode:04o}: other users may read the secrets maitred keeps there; run `chmod {private} {}`",
        path.display(),
        shell_quote(&path.display().to_string()),
    ))
}

#[cfg(not(unix))]
pub fn shared_warning(_path: &Path) -> Option<String> {
    None
}

/// Logs `shared_warning` for each path, once per path in this process (roles
/// sharing one data directory check it each).
pub fn warn_if_shared(paths: &[&Path]) {
    static WARNED: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    for path in paths {
        let Some(message) = shared_warning(path) else {
            continue;
        };
        let mut warned = WARNED
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if warned.insert(path.to_path_buf()) {
            tracing::warn!("{message}");
        }
    }
}

fn shell_quote(text: &str) -> String {
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_state_is_private() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        create_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&root.path().join("a")), 0o700);
        let file = dir.join("maitred.db");
        create_private_file(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
        assert_eq!(shared_warning(&dir), None);
        assert_eq!(shared_warning(&file), None);
    }

    #[test]
    fn existing_wide_state_is_reported_not_changed() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data dir");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        create_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o755, "an operator's choice is left alone");
        let warning = shared_warning(&dir).expect("a warning for a 0755 directory");
        assert!(warning.contains(&dir.display().to_string()), "{warning}");
        assert!(warning.contains("mode 0755"), "{warning}");
        assert!(
            warning.contains(&format!("chmod 700 '{}'", dir.display())),
            "{warning}"
        );

        let file = dir.join("dev-credentials.json");
        std::fs::write(&file, "{}").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        create_private_file(&file).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{}");
        let warning = shared_warning(&file).expect("a warning for a 0644 file");
        assert!(
            warning.contains("mode 0644") && warning.contains("chmod 600"),
            "{warning}"
        );
        assert_eq!(shared_warning(&root.path().join("missing")), None);
    }
}
