//! The nemesis's disks: with the `disk` fault, every host's data directory is a size-limited tmpfs
//! of its own, mounted before the node first starts; the fault fills one up with a file of zeros
//! and heals by removing that file. Every mount is the run's own and is unmounted when `Disks` is
//! dropped (after the hosts, which are stopped first), and only those.

use anyhow::{bail, Context, Result};
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// The size of each host's tmpfs: room for a run's logs and checkpoints, small enough to fill in
/// a moment.
pub const SIZE_MIB: u64 = 512;
/// The file that fills a disk up.
const FILLER: &str = "nemesis-filler";
/// Written in chunks of this size until the disk is full.
const CHUNK: usize = 1 << 20;

pub struct Disks {
    /// The data directories mounted, by host index.
    mounted: Vec<PathBuf>,
}

impl Disks {
    /// No disk of its own (the `disk` fault not asked for).
    pub fn none() -> Disks {
        Disks { mounted: vec![] }
    }

    /// Mounts a tmpfs of `SIZE_MIB` on each of `data_dirs` (created, empty).
    pub fn mount(data_dirs: Vec<PathBuf>) -> Result<Disks> {
        let mut disks = Disks { mounted: vec![] };
        for dir in data_dirs {
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            if fs::read_dir(&dir)?.next().is_some() {
                bail!("{} is not empty: the nemesis mounts a tmpfs only on a new data directory", dir.display());
            }
            let size = format!("size={SIZE_MIB}m");
            run(Command::new("mount").args(["-t", "tmpfs", "-o", &size, "tmpfs"]).arg(&dir))?;
            disks.mounted.push(dir);
        }
        Ok(disks)
    }

    /// Fills host `h`'s disk until the kernel says it is full; returns the bytes written.
    pub fn fill(&self, h: usize) -> Result<u64> {
        let dir = self.mounted.get(h).context("the disk fault without a tmpfs of its own")?;
        let mut file = fs::File::create(dir.join(FILLER))?;
        let chunk = vec![0u8; CHUNK];
        let mut written = 0u64;
        // Bounded: the tmpfs holds SIZE_MIB at most.
        for _ in 0..=SIZE_MIB {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => return Err(e).context("filling the disk"),
            }
        }
        Ok(written)
    }

    /// Frees what `fill` wrote.
    pub fn free(&self, h: usize) -> Result<()> {
        let dir = self.mounted.get(h).context("the disk fault without a tmpfs of its own")?;
        fs::remove_file(dir.join(FILLER)).context("freeing the disk")
    }
}

impl Drop for Disks {
    fn drop(&mut self) {
        for dir in self.mounted.drain(..).rev() {
            if let Err(e) = run(Command::new("umount").arg(&dir)) {
                eprintln!("nemesis: could not unmount {}: {e:#}", dir.display());
            }
        }
    }
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}
