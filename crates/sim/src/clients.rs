//! The simulated clients' side of the world: the setup `MSET`, then each client's operations —
//! batches of Redis commands run through the core's transaction client — sent to a random near
//! vnode per batch, with time-outs and back-offs.

use crate::history::{Observed, Outcome, ScanRun};
use crate::slot::Slot;
use crate::workloads::{Batch, Plan};
use crate::world::{Event, World, CLIENT_TIMEOUT_US, OPERATOR, SETUP_CLIENT};
use rand::Rng;
use waymark_core::client::{Answer, DataCmd, Finished, Step};
use waymark_core::{Request, Response, ScanCursor};

const SETUP: &str = "setup";
/// The plan of a scan of the whole keyspace (`--scans`).
const SCAN: &str = "scan";
/// A client's operation is a scan one time in this many (`--scans`).
const SCAN_ONE_IN: u32 = 6;

impl World {
    pub(crate) fn start_setup(&mut self) {
        let pairs = self.workload.setup();
        if pairs.is_empty() {
            return self.setup_finished();
        }
        let plan = Plan { kind: SETUP, read_keys: vec![], params: vec![], target_keys: vec![] };
        let step = self.clients[SETUP_CLIENT].start(plan, SETUP, Batch::Command(DataCmd::MSet(pairs)), self.now_us);
        self.client_step(SETUP_CLIENT, step);
    }

    pub(crate) fn setup_finished(&mut self) {
        self.setup_done = true;
        for c in 0..self.clients.len() {
            let at = self.now_us + self.rng.gen_range(0..2_000);
            self.schedule(at, Event::ClientWake { client: c });
        }
    }

    pub(crate) fn client_wake(&mut self, client: usize) {
        if self.stopping || !self.clients[client].is_idle() {
            return;
        }
        if self.cfg.scans && self.rng.gen_range(0..SCAN_ONE_IN) == 0 {
            return self.start_scan(client);
        }
        let plan = self.workload.plan(client, &mut self.rng);
        match self.workload.next(&plan, 0, None) {
            Some((label, batch)) => {
                let step = self.clients[client].start(plan, label, batch, self.now_us);
                self.client_step(client, step);
            }
            None => self.client_idle(client),
        }
    }

    /// Carries out what the transaction client asks for next.
    fn client_step(&mut self, c: usize, step: Step) {
        match step {
            Step::Send(requests) => self.client_send(c, requests),
            Step::Backoff { base_us, .. } => {
                let at = self.now_us + self.rng.gen_range(base_us / 2..=base_us + base_us / 2);
                self.schedule(at, Event::ClientResume { client: c });
            }
            Step::Blocked { poll_us } => self.schedule(self.now_us + poll_us, Event::ClientResume { client: c }),
            Step::Done(finished) => self.batch_done(c, finished),
        }
    }

    /// Sends a batch's requests together to one random store vnode, as a connection to one host.
    fn client_send(&mut self, client: usize, requests: Vec<Request>) {
        let (first_req, requests) = self.clients[client].send(requests, self.now_us, CLIENT_TIMEOUT_US);
        let node = Slot::random(&mut self.rng, self.nodes.len());
        let at = self.now_us + self.rng.gen_range(50..300);
        for (i, request) in requests.into_iter().enumerate() {
            let req = first_req + i as u64;
            self.schedule(at, Event::ToVnode { node, client: client as u64, req, request });
        }
        self.schedule(self.now_us + CLIENT_TIMEOUT_US, Event::ClientTimeout { client, req: first_req });
    }

    pub(crate) fn client_resume(&mut self, c: usize) {
        let step = self.clients[c].resume();
        self.client_step(c, step);
    }

    pub(crate) fn client_timeout(&mut self, c: usize, first_req: u64) {
        if self.clients[c].in_flight.as_ref().is_some_and(|f| f.first_req == first_req) {
            if let Some(step) = self.clients[c].on_response(first_req, None, true) {
                self.client_step(c, step);
            }
        }
    }

    pub(crate) fn arrive_at_client(&mut self, client: u64, req: u64, response: Response) {
        if client == OPERATOR {
            return self.operator_reply(req, Some(response));
        }
        let c = client as usize;
        let Some(invoked_us) = self.clients[c].in_flight.as_ref().filter(|f| f.holds(req)).map(|f| f.sent_us) else {
            return; // a late answer to a request the client gave up on
        };
        if let Some(what) = self.clients[c].observation(req, &response) {
            self.history.observed.push(Observed { client: c, invoked_us, at_us: self.now_us, what });
        }
        if let Some(step) = self.clients[c].on_response(req, Some(response), false) {
            self.client_step(c, step);
        }
    }

    /// A batch is over: its transactions go into the history, and the workload picks the next
    /// batch from its answer.
    fn batch_done(&mut self, c: usize, finished: Finished) {
        let records = self.clients[c].records(&finished, self.now_us);
        let setup_committed = records.iter().any(|r| r.kind == SETUP && r.outcome == Outcome::Committed);
        self.history.txns.extend(records);
        if !self.setup_done {
            self.clients[c].end_op();
            if setup_committed {
                return self.setup_finished();
            }
            return self.start_setup();
        }
        let plan = self.clients[c].plan().cloned().expect("an operation");
        if plan.kind == SCAN {
            return self.scan_page_done(c, finished.answer);
        }
        let done = self.clients[c].batches();
        match self.workload.next(&plan, done, Some(&finished.answer)) {
            Some((label, batch)) if !self.stopping => {
                let step = self.clients[c].next_batch(label, batch, self.now_us);
                self.client_step(c, step);
            }
            _ => {
                self.clients[c].end_op();
                self.client_idle(c);
            }
        }
    }

    /// A scan of the whole keyspace, a page per batch, from the start (`--scans`).
    fn start_scan(&mut self, c: usize) {
        let plan = Plan { kind: SCAN, read_keys: vec![], params: vec![], target_keys: vec![] };
        let run = ScanRun { client: c, began_us: self.now_us, ..ScanRun::default() };
        self.scans_running.insert(c, run);
        let step = self.clients[c].start(plan, SCAN, Batch::Scan(ScanCursor::default()), self.now_us);
        self.client_step(c, step);
    }

    /// A page came back: the scan goes on from its cursor, or it is over and goes into the
    /// history. A page that failed (a timeout, `TRYAGAIN`) ends the scan unfinished.
    fn scan_page_done(&mut self, c: usize, answer: Answer) {
        let next = match (answer, self.scans_running.get_mut(&c)) {
            (Answer::Keys { keys, next }, Some(run)) => {
                run.keys.extend(keys);
                run.pages += 1;
                next
            }
            _ => {
                self.scans_running.remove(&c);
                return self.end_scan(c);
            }
        };
        match next {
            Some(cursor) if !self.stopping => {
                let step = self.clients[c].next_batch(SCAN, Batch::Scan(cursor), self.now_us);
                self.client_step(c, step);
            }
            Some(_) => {
                self.scans_running.remove(&c);
                self.end_scan(c);
            }
            None => {
                if let Some(mut run) = self.scans_running.remove(&c) {
                    run.ended_us = self.now_us;
                    self.history.scans.push(run);
                }
                self.end_scan(c);
            }
        }
    }

    fn end_scan(&mut self, c: usize) {
        self.clients[c].end_op();
        self.client_idle(c);
    }

    pub(crate) fn client_idle(&mut self, c: usize) {
        let at = self.now_us + self.rng.gen_range(100..2_000);
        self.schedule(at, Event::ClientWake { client: c });
    }
}
