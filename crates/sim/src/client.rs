//! A simulated client: runs one workload operation at a time against a random near vnode —
//! GETs first, then one `WATCH … MULTI … EXEC` transaction — and records what it saw.

use crate::history::{ClientRead, ClientTxn, Observation, Outcome};
use crate::workloads::Plan;
use waymark_core::{AbortReason, ReadCheck, Request, Response, Write};

/// What a client does next, for the world to carry out.
pub enum ClientAction {
    Send(Request),
    /// The operation is over (recorded or skipped); think, then plan the next one.
    Done(Option<ClientTxn>),
}

/// A client's request in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InFlight {
    /// Its number among the client's requests.
    pub req: u64,
    /// When the client stops waiting for it.
    pub deadline_us: u64,
}

pub struct Client {
    pub id: usize,
    pub req_seq: u64,
    pub in_flight: Option<InFlight>,
    /// When the request in flight was sent.
    pub sent_us: u64,
    op: Option<Op>,
}

struct Op {
    plan: Plan,
    reads: Vec<ClientRead>,
    writes: Option<Vec<Write>>,
    invoked_us: u64,
}

impl Client {
    pub fn new(id: usize) -> Self {
        Client { id, req_seq: 0, in_flight: None, sent_us: 0, op: None }
    }

    pub fn is_idle(&self) -> bool {
        self.op.is_none()
    }

    pub fn start(&mut self, plan: Plan, now_us: u64) -> Option<Request> {
        let op = Op { plan, reads: vec![], writes: None, invoked_us: now_us };
        self.op = Some(op);
        self.next_get()
    }

    fn next_get(&self) -> Option<Request> {
        let op = self.op.as_ref()?;
        op.plan.read_keys.get(op.reads.len()).map(|k| Request::Get { key: k.clone() })
    }

    /// Called once every GET has answered: the workload turns the reads into writes (or skips).
    pub fn begin_txn(&mut self, writes: Option<Vec<Write>>, now_us: u64) -> ClientAction {
        let Some(op) = self.op.as_mut() else { return ClientAction::Done(None) };
        let Some(writes) = writes else {
            self.op = None;
            return ClientAction::Done(None);
        };
        op.invoked_us = now_us;
        op.writes = Some(writes.clone());
        let reads = op.reads.iter().map(|r| ReadCheck { key: r.key.clone(), version: r.version }).collect();
        ClientAction::Send(Request::Txn { reads, writes })
    }

    pub fn plan(&self) -> Option<&Plan> {
        self.op.as_ref().map(|o| &o.plan)
    }

    pub fn reads(&self) -> &[ClientRead] {
        self.op.as_ref().map_or(&[], |o| &o.reads)
    }

    pub fn reads_complete(&self) -> bool {
        self.op.as_ref().is_some_and(|o| o.reads.len() == o.plan.read_keys.len() && o.writes.is_none())
    }

    /// What `response` to the request in flight tells this client of committed data (for the
    /// real-time checker), besides a commit acknowledgement.
    pub fn observation(&self, response: &Option<Response>) -> Option<Observation> {
        let op = self.op.as_ref()?;
        match response.as_ref()? {
            Response::Value { version, .. } if op.writes.is_none() => {
                let key = op.plan.read_keys.get(op.reads.len())?.clone();
                Some(Observation::Read { key, version: *version })
            }
            Response::Aborted { reason: AbortReason::WatchFailed { key }, .. } => {
                let read = op.reads.iter().find(|r| r.key == *key)?;
                Some(Observation::WatchFailed { key: key.clone(), read_version: read.version })
            }
            _ => None,
        }
    }

    /// A response (or, with `None`, a time-out) for the request in flight.
    pub fn on_response(&mut self, response: Option<Response>, now_us: u64) -> Option<ClientAction> {
        self.in_flight = None;
        let op = self.op.as_mut()?;
        if op.writes.is_none() {
            return Some(self.on_get(response));
        }
        let (outcome, tx, written) = match response {
            Some(Response::Committed { tx, writes }) => (Outcome::Committed, Some(tx), writes),
            Some(Response::Aborted { tx, .. }) => (Outcome::Aborted, tx, vec![]),
            Some(Response::Unavailable { .. }) => (Outcome::Aborted, None, vec![]),
            Some(Response::Unknown { tx }) => (Outcome::Unknown, Some(tx), vec![]),
            Some(other) => panic!("unexpected response to a transaction: {other:?}"),
            None => (Outcome::Unknown, None, vec![]),
        };
        let op = self.op.take().expect("an operation");
        let record = ClientTxn {
            client: self.id,
            kind: op.plan.kind,
            tx,
            reads: op.reads,
            writes: op.writes.unwrap_or_default(),
            written,
            outcome,
            invoked_us: op.invoked_us,
            completed_us: now_us,
        };
        Some(ClientAction::Done(Some(record)))
    }

    fn on_get(&mut self, response: Option<Response>) -> ClientAction {
        let op = self.op.as_mut().expect("an operation");
        match response {
            Some(Response::Value { value, version }) => {
                let key = op.plan.read_keys[op.reads.len()].clone();
                op.reads.push(ClientRead { key, value, version });
                match self.next_get() {
                    Some(req) => ClientAction::Send(req),
                    None => ClientAction::Done(None), // the world asks the workload, then calls begin_txn
                }
            }
            _ => {
                self.op = None;
                ClientAction::Done(None)
            }
        }
    }
}
