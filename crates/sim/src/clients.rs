//! The simulated clients' side of the world: the setup transaction, then each client's
//! operations (GETs, then one transaction) sent to a random near vnode, with time-outs.

use crate::client::{ClientAction, InFlight};
use crate::history::{ClientTxn, Observed, Outcome};
use crate::slot::Slot;
use crate::world::{Event, World, CLIENT_TIMEOUT_US, OPERATOR, SETUP_CLIENT};
use rand::Rng;
use waymark_core::{Request, Response, Write};

impl World {
    pub(crate) fn start_setup(&mut self) {
        let writes: Vec<Write> = self.workload.setup();
        if writes.is_empty() {
            return self.setup_finished();
        }
        self.issue_txn(SETUP_CLIENT, writes);
    }

    pub(crate) fn setup_finished(&mut self) {
        self.setup_done = true;
        for c in 0..self.clients.len() {
            let at = self.now_us + self.rng.gen_range(0..2_000);
            self.schedule(at, Event::ClientWake { client: c });
        }
    }

    pub(crate) fn issue_txn(&mut self, client: usize, writes: Vec<Write>) {
        let plan = crate::workloads::Plan { kind: "setup", read_keys: vec![], params: vec![], target_keys: vec![] };
        let _ = self.clients[client].start(plan, self.now_us);
        if let ClientAction::Send(req) = self.clients[client].begin_txn(Some(writes), self.now_us) {
            self.client_send(client, req);
        }
    }

    pub(crate) fn client_wake(&mut self, client: usize) {
        if self.stopping || !self.clients[client].is_idle() {
            return;
        }
        let plan = self.workload.plan(client, &mut self.rng);
        match self.clients[client].start(plan, self.now_us) {
            Some(req) => self.client_send(client, req),
            None => self.client_reads_done(client),
        }
    }

    pub(crate) fn client_send(&mut self, client: usize, request: Request) {
        let c = &mut self.clients[client];
        c.req_seq += 1;
        let req = c.req_seq;
        let deadline = self.now_us + CLIENT_TIMEOUT_US;
        c.in_flight = Some(InFlight { req, deadline_us: deadline });
        c.sent_us = self.now_us;
        let node = Slot::random(&mut self.rng, self.nodes.len()); // a store vnode
        let at = self.now_us + self.rng.gen_range(50..300);
        self.schedule(at, Event::ToVnode { node, client: client as u64, req, request });
        self.schedule(deadline, Event::ClientTimeout { client, req });
    }

    pub(crate) fn arrive_at_client(&mut self, client: u64, req: u64, response: Option<Response>) {
        if client == OPERATOR {
            return self.operator_reply(req, response);
        }
        let c = client as usize;
        if self.clients[c].in_flight.is_none_or(|f| f.req != req) {
            return; // a late answer to a request the client gave up on
        }
        if let Some(what) = self.clients[c].observation(&response) {
            let invoked_us = self.clients[c].sent_us;
            self.history.observed.push(Observed { client: c, invoked_us, at_us: self.now_us, what });
        }
        match self.clients[c].on_response(response, self.now_us) {
            Some(ClientAction::Send(req)) => self.client_send(c, req),
            Some(ClientAction::Done(Some(record))) => self.record_txn(c, record),
            Some(ClientAction::Done(None)) if self.clients[c].reads_complete() => self.client_reads_done(c),
            _ => self.client_idle(c),
        }
    }

    pub(crate) fn client_reads_done(&mut self, c: usize) {
        let plan = self.clients[c].plan().cloned().expect("an operation");
        let writes = self.workload.build(&plan, self.clients[c].reads());
        match self.clients[c].begin_txn(writes, self.now_us) {
            ClientAction::Send(req) => self.client_send(c, req),
            ClientAction::Done(_) => self.client_idle(c),
        }
    }

    pub(crate) fn record_txn(&mut self, c: usize, record: ClientTxn) {
        let setup = record.kind == "setup";
        let committed = record.outcome == Outcome::Committed;
        self.history.txns.push(record);
        if setup && !self.setup_done {
            if committed {
                return self.setup_finished();
            }
            self.history.txns.pop();
            let writes = self.workload.setup();
            return self.issue_txn(SETUP_CLIENT, writes);
        }
        self.client_idle(c);
    }

    pub(crate) fn client_idle(&mut self, c: usize) {
        if !self.setup_done {
            let writes = self.workload.setup();
            return self.issue_txn(SETUP_CLIENT, writes);
        }
        let at = self.now_us + self.rng.gen_range(100..2_000);
        self.schedule(at, Event::ClientWake { client: c });
    }
}
