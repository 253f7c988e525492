// A cache with expiry and a fixed-window rate limiter, as applications write them with node-redis
// or ioredis, run against every host of a Waymark cluster with the library's default settings.
//
//   node cache_and_rate_limiter.mjs (node-redis|ioredis) HOST:PORT[,HOST:PORT…] PREFIX
//
// Prints one JSON line of what it saw; exits 1 with the reason if a check fails.
import { createClient } from "redis";
import Redis from "ioredis";

const [library, hostList, prefix] = process.argv.slice(2);
const hosts = hostList.split(",").map((h) => {
  const [host, port] = h.split(":");
  return { host, port: Number(port) };
});
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// Every wait is bounded: the test's own timeout is the last resort.
const WAIT_LIMIT_MS = 10_000;

function fail(why) {
  console.error(`${library}: ${why}`);
  process.exit(1);
}

function expect(what, got, want) {
  if (got !== want) fail(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

// The same few calls through either library.
async function connect({ host, port }) {
  if (library === "node-redis") {
    const c = createClient({ url: `redis://${host}:${port}` });
    c.on("error", (e) => console.error(`node-redis ${port}: ${e.message}`));
    await c.connect();
    return {
      setPx: (k, v, ms) => c.set(k, v, { expiration: { type: "PX", value: ms } }),
      setNxPx: (k, v, ms) => c.set(k, v, { condition: "NX", expiration: { type: "PX", value: ms } }),
      get: (k) => c.get(k),
      pttl: (k) => c.pTTL(k),
      exists: (k) => c.exists(k),
      // INCR and EXPIRE NX in one transaction: the window starts with its first request.
      hit: async (k, windowMs) => (await c.multi().incr(k).pExpire(k, windowMs, "NX").exec())[0],
      close: () => c.quit(),
    };
  }
  if (library === "ioredis") {
    const c = new Redis({ host, port, maxRetriesPerRequest: 3 });
    c.on("error", (e) => console.error(`ioredis ${port}: ${e.message}`));
    return {
      setPx: (k, v, ms) => c.set(k, v, "PX", ms),
      setNxPx: (k, v, ms) => c.set(k, v, "PX", ms, "NX"),
      get: (k) => c.get(k),
      pttl: (k) => c.pttl(k),
      exists: (k) => c.exists(k),
      hit: async (k, windowMs) => {
        const [[incrError, count], [expireError]] = await c.multi().incr(k).pexpire(k, windowMs, "NX").exec();
        if (incrError || expireError) fail(`rate limiter transaction: ${incrError || expireError}`);
        return count;
      },
      close: () => c.quit(),
    };
  }
  fail(`unknown library ${library}`);
}

// Reads `key` through every client until all say null, or the limit passes.
async function waitGoneEverywhere(clients, key) {
  const begun = Date.now();
  while (Date.now() - begun < WAIT_LIMIT_MS) {
    const values = await Promise.all(clients.map((c) => c.get(key)));
    if (values.every((v) => v === null)) return Date.now() - begun;
    await sleep(50);
  }
  fail(`${key} still read after ${WAIT_LIMIT_MS} ms`);
}

async function cache(clients) {
  const key = `${prefix}:cache:user:42`;
  // Cache-aside: a miss, the value computed and cached for 1.5 s, then hits on every host.
  expect("a first read misses", await clients[0].get(key), null);
  expect("the value is cached once", await clients[0].setNxPx(key, "alice", 1500), "OK");
  expect("a second SET NX loses", await clients[1].setNxPx(key, "bob", 1500), null);
  for (const [i, c] of clients.entries()) expect(`host ${i} reads the cached value`, await c.get(key), "alice");
  const pttl = await clients[2].pttl(key);
  if (!(pttl > 0 && pttl <= 1500)) fail(`PTTL ${pttl}, want within (0, 1500]`);
  const goneAfterMs = await waitGoneEverywhere(clients, key);
  expect("an expired key does not exist", await clients[1].exists(key), 0);
  // A refresh with a fresh deadline is cached again.
  expect("the value is cached again", await clients[2].setPx(key, "alice2", 5000), "OK");
  expect("host 0 reads the refresh", await clients[0].get(key), "alice2");
  return { pttl_ms: pttl, gone_after_ms: goneAfterMs };
}

async function rateLimiter(clients) {
  const key = `${prefix}:rate:api-key-7`;
  const limit = 10;
  const windowMs = 1500;
  // 30 requests at once from the three hosts: exactly `limit` are let through.
  const counts = await Promise.all(Array.from({ length: 30 }, (_, i) => clients[i % clients.length].hit(key, windowMs)));
  const allowed = counts.filter((n) => n <= limit).length;
  expect("requests allowed in the first window", allowed, limit);
  expect("the counter counts every request", Math.max(...counts), 30);
  const sorted = [...counts].sort((a, b) => a - b);
  expect("each request has its own count", sorted.every((n, i) => n === i + 1), true);
  const pttl = await clients[1].pttl(key);
  if (!(pttl > 0 && pttl <= windowMs)) fail(`the window's PTTL ${pttl}, want within (0, ${windowMs}]`);
  await waitGoneEverywhere(clients, key);
  expect("a new window starts at 1", await clients[2].hit(key, windowMs), 1);
  return { allowed, window_pttl_ms: pttl };
}

const clients = [];
for (const h of hosts) clients.push(await connect(h));
const seen = { library, hosts: hosts.length, cache: await cache(clients), rate_limiter: await rateLimiter(clients) };
await Promise.all(clients.map((c) => c.close()));
console.log(JSON.stringify(seen));
