//! Local clusters a command started for itself (the demo, the benchmark): stopped when the command
//! ends, however it ends — by an error (drop) or by Ctrl-C or SIGTERM (`stop_on_signal`). Nodes
//! run in their own process group, so a signal to the command does not reach them: it stops them,
//! each by the pid it recorded (`cluster::stop`).

use super::cluster;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
pub struct Started(Arc<Mutex<Vec<PathBuf>>>);

impl Started {
    pub fn add(&self, dir: &Path) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(dir.to_path_buf());
    }

    pub fn stop_all(&self) {
        let dirs = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        for dir in dirs {
            let _ = cluster::stop(&dir);
        }
    }

    /// On Ctrl-C or SIGTERM: says so (`what` names the command), stops every cluster, exits 130.
    pub fn stop_on_signal(&self, what: &'static str) -> Result<()> {
        let started = self.clone();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        std::thread::spawn(move || {
            rt.block_on(async {
                let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
                let term = async move {
                    match term.as_mut() {
                        Some(t) => drop(t.recv().await),
                        None => std::future::pending().await,
                    }
                };
                tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = term => {} }
            });
            eprintln!("\ninterrupted: stopping the {what}'s clusters");
            started.stop_all();
            std::process::exit(130);
        });
        Ok(())
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        self.stop_all();
    }
}
