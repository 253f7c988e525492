//! A tree vnode without data — a manager, or any vnode of the tree-only world — as the simulated
//! worlds hold it: its alteration role while it runs, and what its log keeps across a crash.

use waymark_core::alter::{AlterConfig, AlterInput, AlterNode, AlterOutput, Metadata, Term};

pub struct TreeVnode {
    /// Absent while the vnode is down.
    pub alter: Option<AlterNode>,
    pub cfg: AlterConfig,
    /// What the log holds: the metadata as of the last persisted alteration or clone.
    pub disk: Metadata,
    /// The root term promised, as the log holds it.
    pub disk_term: Term,
    /// Bumped at every stop, so that timers and writes of a dead instance are ignored.
    pub instance: u32,
    /// Fault: the next alteration written comes back damaged when read.
    pub corrupt_next: bool,
}

impl TreeVnode {
    /// Down, with an empty log: `start` brings it up.
    pub fn new(cfg: AlterConfig) -> Self {
        TreeVnode {
            alter: None,
            cfg,
            disk: Metadata::default(),
            disk_term: Term::ZERO,
            instance: 0,
            corrupt_next: false,
        }
    }

    /// Starts it from its log: the input to step it with first; `None` if it runs already.
    pub fn start(&mut self) -> Option<AlterInput> {
        if self.alter.is_some() {
            return None;
        }
        self.alter = Some(AlterNode::new(self.cfg.clone()));
        Some(AlterInput::Started { metadata: self.disk.clone(), term: self.disk_term })
    }

    /// Stops it (a crash, or a secondary parent told to stop); `None` if it was down.
    pub fn stop(&mut self) -> Option<AlterNode> {
        let alter = self.alter.take()?;
        self.instance += 1;
        Some(alter)
    }

    /// Keeps in the log what an output makes durable (its writes are synchronous here).
    pub fn keep(&mut self, o: &AlterOutput) {
        match o {
            AlterOutput::PersistClone { metadata } => self.disk = metadata.clone(),
            AlterOutput::PersistTerm { term } => self.disk_term = *term,
            AlterOutput::PersistApplied { .. } => {
                if let Some(a) = &self.alter {
                    self.disk = a.metadata().clone();
                }
            }
            _ => {}
        }
    }

    /// The bytes of an alteration as they will be read back: damaged if the fault is armed.
    pub fn written(&mut self, mut bytes: Vec<u8>) -> Vec<u8> {
        if std::mem::take(&mut self.corrupt_next) {
            corrupt(&mut bytes);
        }
        bytes
    }
}

/// What a bad disk or a bad copy hands back.
pub fn corrupt(bytes: &mut [u8]) {
    if let Some(last) = bytes.last_mut() {
        *last ^= 0x01;
    }
}
