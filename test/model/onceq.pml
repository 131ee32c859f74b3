/*
 * onceq.pml: a Promela model of onceq's exactly-once protocol (sessions,
 * heartbeat and fence, the reaper and its foreign-key release, claim, ack,
 * fail/retry with the claim's identity, the reconciliation sweep and the
 * partition handover). docs/model.md maps every process and variable to
 * the code; test/model/check.sh runs it in CI.
 *
 * Each `atomic` block that touches the "db_" variables is one SQL
 * statement (or one transaction): PostgreSQL runs it atomically. Worker
 * memory is the worker's own local variables. Faults (a stall past the
 * expiry, a fence, a crash, a reply lost on the wire) are bounded by
 * MAXF, so that "when faults stop" has a meaning for the liveness
 * property.
 *
 * Compile-time switches (spin -D...):
 *   PARTS         workers are --partitioned (rounds, handover, orphans)
 *   NOCLAIMCHECK  the ack's DELETE forgets "AND claim = $session": the
 *                 broken variant that must produce a counterexample
 *   NORECONCILE   the worker never runs the reconciliation sweep: the
 *                 liveness check must then fail (a claim whose reply was
 *                 lost strands its item)
 *   LIVENESS      also check "every item ends acked or dead" (the ltl
 *                 formula below; run pan with -a -f)
 *   ORDERED       both items carry one ordering key, item 0 enqueued
 *                 first (lower enqueue_seq): the claim takes item 1 only
 *                 once item 0 has left onceq_items (KEY_HEAD in
 *                 lib/src/dialect.c), and an ack of item 1 asserts that
 *                 item 0 ended first (per-key order, across reaps, stale
 *                 sessions and, with PARTS, a key spread over two parts)
 *   NOKEYHEAD     with ORDERED, the claim forgets the key predicate: the
 *                 broken variant that must produce a counterexample
 *   NOSESSIONLOCK the claim reads its session row without locking it (no
 *                 FOR KEY SHARE in SESSION_LIVE, lib/src/dialect.c): the
 *                 broken variant that must leave an item claimed by a
 *                 deleted session (the orphans() monitor)
 *
 * Since schema v8 no foreign key ties onceq_items.claim to onceq_sessions.
 * A claim is two steps of one statement: it locks its session row (or finds
 * it gone or expired and fails, claiming nothing), then claims and commits,
 * releasing the lock. Deleting a session row (the reap, a worker's own
 * delete) waits while a claim holds that lock, then releases the session's
 * items in the same transaction (OQ__SQL_RELEASE_SESSIONS).
 */

#define W 2    /* workers */
#define N 2    /* items */
#define P 2    /* parts; item i lives in part i % P */
#define MAXA 2 /* max_attempts */
#ifndef MAXF
#define MAXF 2 /* fault budget */
#endif
#define S (W + MAXF + 1) /* session ids 1..S-1; 0 is NULL */
/* ANY_S(m): m(s) holds for some session id s (spelled out: a guard must
 * be one expression so that a blocked process sits at a valid end) */
#if MAXF == 1
#define ANY_S(m) (m(1) || m(2) || m(3))
#elif MAXF == 2
#define ANY_S(m) (m(1) || m(2) || m(3) || m(4))
#elif MAXF == 3
#define ANY_S(m) (m(1) || m(2) || m(3) || m(4) || m(5))
#else
#error "MAXF must be 1..3"
#endif
/* the reap's DELETE waits for the claims that locked the row */
#define REAPABLE(s) (db_row[s] && db_expired[s] && db_shlock[s] == 0)
#define ABANDONED(s)                                                           \
  (db_row[s] && !db_expired[s] && s != g_cur[0] && s != g_cur[1])
#define RUNNING(w) (g_cur[w] != 0 && db_row[g_cur[w]] && !db_expired[g_cur[w]])
/* where worker w looks: everywhere, or (PARTS) the parts it owns and the
 * orphan parts, whose owner row is missing or whose owner is not live */
#ifdef PARTS
#define LOOKS(w, i)                                                            \
  (CLAIMABLE(w, PART(i)) || db_owner[PART(i)] == 0 ||                          \
   !db_row[db_owner[PART(i)]] || db_expired[db_owner[PART(i)]])
#else
#define LOOKS(w, i) true
#endif
/* KEY_OK(i): item i is its key's head. Under ORDERED item 0 has the
 * lower enqueue_seq; the second probe of KEY_HEAD (no item of the key
 * claimed) adds nothing here, since item 0 is then not PRESENT. */
#if defined(ORDERED) && !defined(NOKEYHEAD)
#define KEY_OK(i) ((i) == 0 || db_state[0] != PRESENT)
#else
#define KEY_OK(i) true
#endif
#define READY(w, i)                                                            \
  (db_state[i] == PRESENT && db_claim[i] == 0 && db_att[i] < MAXA &&           \
   !held[i] && LOOKS(w, i) && KEY_OK(i))
#define EXHAUSTED(k)                                                           \
  (db_state[k] == PRESENT && db_claim[k] == 0 && db_att[k] >= MAXA)

#define PRESENT 0 /* a row in onceq_items */
#define ACKED 1   /* deleted by an ack */
#define DEAD 2    /* moved to onceq_dead */

#define LIVE 0   /* heartbeats land */
#define FENCED 1 /* last landed heartbeat older than expiry - margin */
#define LOST 2   /* row gone or expired: final for the session */

#ifdef NORECONCILE
#define SWEEPS false
#else
#define SWEEPS true
#endif

/* ---- the database ---- */
bool db_row[S];     /* onceq_sessions has a row for session s */
bool db_expired[S]; /* heartbeated_at + expiry < now() */
byte db_claim[N];   /* onceq_items.claim (session id, 0 = NULL) */
byte db_cat[N];     /* claimed_at: one value per claim of the item */
byte db_att[N];     /* attempts */
byte db_state[N];   /* PRESENT, ACKED, DEAD */
byte db_owner[P];   /* onceq_session_parts: part -> session (PK part) */
byte db_shlock[S];  /* claim statements holding session s's row lock */

/* ---- ghosts: what the properties look at ---- */
byte g_acks[N];    /* committed acknowledgements of item i */
bool g_reaped[S];  /* session s's row was deleted */
byte g_faults;     /* faults injected so far */
byte g_nexts = 1;  /* next session id to hand out */
byte g_cur[W];     /* the session worker w heartbeats (0: none) */
bool g_round_due[W]; /* something a partition round reads changed */
bool g_claimable[W * P]; /* worker w claims in part p (its memory) */

#define CLAIMABLE(w, p) g_claimable[(w) * P + (p)]
#define PART(i) ((i) % P)
#define FAULT_OK (g_faults < MAXF)
#define ALL_FINAL (db_state[0] != PRESENT && db_state[1] != PRESENT)

inline round_due_all()
{
  g_round_due[0] = 1;
  g_round_due[1] = 1
}

/* Register a new session (OQ__SQL_SESSION_OPEN). */
inline session_open(w, sid)
{
  d_step {
    assert(g_nexts < S);
    sid = g_nexts;
    g_nexts++;
    db_row[sid] = 1;
    db_expired[sid] = 0;
    g_cur[w] = sid;
    round_due_all()
  }
}

/* Delete session s's row and, in the same transaction, release its claims
 * (OQ__SQL_RELEASE_SESSIONS, a statement after the DELETE: it sees every
 * claim that held the row's lock, since the DELETE waited for them); the
 * parts' ON DELETE CASCADE frees its parts. Callers wait for
 * db_shlock[s] == 0 (the DELETE blocks on the claims' lock). */
inline session_delete(s)
{
  db_row[s] = 0;
  g_reaped[s] = 1;
  k = 0;
  do
  :: k < N ->
    if
    :: db_claim[k] == s -> db_claim[k] = 0
    :: else -> skip
    fi;
    k++
  :: else -> break
  od;
  k = 0;
  do
  :: k < P ->
    if
    :: db_owner[k] == s -> db_owner[k] = 0
    :: else -> skip
    fi;
    k++
  :: else -> break
  od;
  k = 0;
  round_due_all()
}

/* The ack transaction: DELETE ... WHERE id = $1 AND claim = $2. */
#ifdef NOCLAIMCHECK
#define ACK_MATCHES(i, sid) (db_state[i] == PRESENT)
#else
#define ACK_MATCHES(i, sid) (db_state[i] == PRESENT && db_claim[i] == sid)
#endif

inline ack_commit(i, sid)
{
  assert(!g_reaped[sid]);     /* a reaped session never acknowledges */
  assert(g_acks[i] == 0);     /* at most one acknowledgement per item */
#ifdef ORDERED
  /* per-key order: item 1 is acknowledged only after item 0 ended
   * (acknowledged or dead-lettered) */
  assert(i == 0 || db_state[0] != PRESENT);
#endif
  g_acks[i]++;
  db_state[i] = ACKED;
  db_claim[i] = 0
}

/* The reaper (OQ__SQL_REAP_SESSIONS then OQ__SQL_REAP_EXHAUSTED), run by
 * any worker or coordinator; one process stands for all of them. */
active proctype reaper()
{
  byte s, k;
end:
  do
  :: atomic {
      ANY_S(REAPABLE) ->
      s = 1;
      do
      :: !REAPABLE(s) -> s++
      :: REAPABLE(s) -> break
      od;
      session_delete(s);
      s = 0
    }
  :: atomic {
      EXHAUSTED(0) || EXHAUSTED(1) ->
      if
      :: EXHAUSTED(0) -> k = 0
      :: else -> k = 1
      fi;
      db_state[k] = DEAD;
      k = 0
    }
  od
}

/* Time passes: a session nobody heartbeats any more (its worker crashed
 * or moved on) expires. Not a fault: it is what a crash leads to. */
active proctype clock()
{
  byte s;
end:
  do
  :: atomic {
      ANY_S(ABANDONED) ->
      s = 1;
      do
      :: !ABANDONED(s) -> s++
      :: ABANDONED(s) -> break
      od;
      db_expired[s] = 1;
      round_due_all();
      s = 0
    }
  /* fault: a live worker's session expires in the database (SIGSTOP past
   * the expiry, a network partition, a stalled heartbeat connection) */
  :: atomic {
      FAULT_OK && (RUNNING(0) || RUNNING(1)) ->
      if
      :: g_cur[0] != 0 && db_row[g_cur[0]] && !db_expired[g_cur[0]] ->
        db_expired[g_cur[0]] = 1
      :: g_cur[1] != 0 && db_row[g_cur[1]] && !db_expired[g_cur[1]] ->
        db_expired[g_cur[1]] = 1
      fi;
      g_faults++;
      round_due_all()
    }
  od
}

proctype worker(byte w)
{
  byte sid;       /* our session */
  byte st;        /* LIVE, FENCED, LOST */
  bool held[N];   /* a job holds item i (queued, running, acking) */
  byte hcat[N];   /* the claimed_at the job got from the claim */
  bool amb[N];    /* the job's ack commit was ambiguous */
  bool need_rec;  /* a reconciliation sweep is due */
  bool rec[N];    /* the sweep's read: claimed by us, no job */
  byte rcat[N];   /* ... and the claimed_at it read */
  bool rec_phase; /* between the sweep's read and its release */
  bool claiming;  /* a claim statement is between its lock and its commit */
  byte i, k, n, idx, lo, hi;

  session_open(w, sid);
  st = LIVE;

end:
  do
  /* ---- heartbeat thread (OQ__SQL_HEARTBEAT); a landed heartbeat while
   * LIVE changes nothing, so it is left out ---- */
  :: atomic {
      st != LOST && (st == FENCED || !db_row[sid] || db_expired[sid]) ->
      if
      :: db_row[sid] && !db_expired[sid] -> st = LIVE; need_rec = 1
      :: else -> st = LOST
      fi
    }
  /* fault: heartbeats stop landing; the monotonic clock fences us */
  :: atomic { st == LIVE && FAULT_OK -> st = FENCED; g_faults++ }
  /* still FENCED at the expiry on our own clock: LOST */
  :: atomic { st == FENCED -> st = LOST }

  /* ---- LOST: wait for the jobs, delete the row, open a new session ---- */
  :: atomic {
      st == LOST && !held[0] && !held[1] && !claiming ->
      if
      :: db_row[sid] && db_shlock[sid] == 0 -> session_delete(sid)
      :: skip /* the delete failed: the reaper will do it */
      fi;
      CLAIMABLE(w, 0) = 0;
      CLAIMABLE(w, 1) = 0;
      need_rec = 0;
      rec_phase = 0;
      rec[0] = 0;
      rec[1] = 0
    };
    session_open(w, sid);
    st = LIVE

  /* fault: SIGKILL. Memory is gone; the row stays until it expires. A
   * supervisor starts the worker again. */
  :: atomic {
      FAULT_OK ->
      g_faults++;
      /* a claim in flight dies with the connection: rolled back, its
       * session lock released, nothing claimed */
      if
      :: claiming ->
#ifndef NOSESSIONLOCK
        db_shlock[sid]--;
#endif
        claiming = 0
      :: else -> skip
      fi;
      held[0] = 0;
      held[1] = 0;
      amb[0] = 0;
      amb[1] = 0;
      CLAIMABLE(w, 0) = 0;
      CLAIMABLE(w, 1) = 0;
      need_rec = 0;
      rec_phase = 0;
      rec[0] = 0;
      rec[1] = 0;
      g_cur[w] = 0
    };
    session_open(w, sid);
    st = LIVE

  /* ---- claim loop: claim one ready item (OQ__SQL_CLAIM, or with PARTS
   * OQ__SQL_CLAIM_PARTS in the parts we own or in orphan parts), one
   * statement in two steps. First its session lock (SESSION_LIVE): no live
   * row, and the statement fails (22012: OQ_ERR_SESSION_LOST), claiming
   * nothing; a reap that holds the row waits before this step, so it is
   * modelled as deleting first. ---- */
  :: atomic {
      st == LIVE && !rec_phase && !claiming &&
      (READY(w, 0) || READY(w, 1)) ->
      if
      :: !db_row[sid] || db_expired[sid] -> st = LOST
      :: else ->
#ifndef NOSESSIONLOCK
        db_shlock[sid]++;
#endif
        claiming = 1
      fi
    }
  /* ... then the scan, the UPDATE and the commit, which ends the lock.
   * Without the lock (NOSESSIONLOCK) the row may be gone by now: the
   * statement read it in its snapshot and claims anyway. */
  :: atomic {
      claiming ->
      if
      :: READY(w, 0) || READY(w, 1) ->
        if
        :: READY(w, 0) -> i = 0
        :: READY(w, 1) -> i = 1
        fi;
#ifdef PARTS
        /* a claim made through ownership of a part: we hold its row */
        assert(!CLAIMABLE(w, PART(i)) || db_owner[PART(i)] == sid);
#endif
        /* a claim never commits for a session whose row is gone */
        assert(db_row[sid]);
        db_claim[i] = sid;
        db_cat[i]++;
        db_att[i]++;
        if
        :: held[i] = 1; hcat[i] = db_cat[i]
        :: FAULT_OK -> g_faults++; need_rec = 1 /* reply lost */
        fi
      :: else -> skip /* nothing ready any more: 0 rows */
      fi;
#ifndef NOSESSIONLOCK
      db_shlock[sid]--;
#endif
      claiming = 0;
      i = 0
    }

#ifdef PARTS
  /* ---- a partition round (oq_parts_rebalance: one transaction) ---- */
  :: atomic {
      st == LIVE && g_round_due[w] && !rec_phase && !claiming ->
      g_round_due[w] = 0;
      if
      :: !db_row[sid] -> st = LOST /* OQ__SQL_PARTS_JOIN found no row */
      :: else ->
        /* live members ordered by id; we are member idx of n */
        n = 0;
        idx = 255;
        k = 1;
        do
        :: k < S ->
          if
          :: db_row[k] && !db_expired[k] ->
            if
            :: k == sid -> idx = n
            :: else -> skip
            fi;
            n++
          :: else -> skip
          fi;
          k++
        :: else -> break
        od;
        if
        :: idx == 255 -> lo = 0; hi = 0
        :: else -> lo = idx * P / n; hi = (idx + 1) * P / n
        fi;
        /* give up held parts outside the block with nothing in flight */
        k = 0;
        do
        :: k < P ->
          if
          :: db_owner[k] == sid && !(k >= lo && k < hi) &&
             !(PART(0) == k && db_state[0] == PRESENT && db_claim[0] == sid) &&
             !(PART(1) == k && db_state[1] == PRESENT && db_claim[1] == sid) ->
            db_owner[k] = 0;
            round_due_all()
          :: else -> skip
          fi;
          /* take a free part of the block: ON CONFLICT (part) DO NOTHING */
          if
          :: db_owner[k] == 0 && k >= lo && k < hi -> db_owner[k] = sid
          :: else -> skip
          fi;
          CLAIMABLE(w, k) = (db_owner[k] == sid && k >= lo && k < hi);
          k++
        :: else -> break
        od;
        /* fault: the reply is lost (committed or not): memory says
         * nothing is claimable until a round succeeds */
        if
        :: skip
        :: FAULT_OK -> g_faults++; g_round_due[w] = 1;
          CLAIMABLE(w, 0) = 0; CLAIMABLE(w, 1) = 0
        fi
      fi;
      k = 0; n = 0; idx = 0; lo = 0; hi = 0
    }
#endif

  /* ---- executor + acker: the handler succeeded; the ack transaction
   * (the ack family in lib/src/dialect.c, ACK_DELETE: OQ__SQL_ACK,
   * OQ__SQL_ACK_BATCH and OQ__SQL_ACK_MANY share its claim-checked
   * DELETE, the only step that decides). Allowed in every state: an ack already sent when the
   * fence falls may still commit, and safety must not depend on it. ---- */
  :: atomic {
      (held[0] || held[1]) ->
      if
      :: held[0] -> i = 0
      :: held[1] -> i = 1
      fi;
      if
      :: amb[i] -> /* reconcile from the database (OQ__SQL_ITEM_CLAIM_OF) */
        if
        :: db_state[i] != PRESENT -> held[i] = 0; amb[i] = 0
        :: db_state[i] == PRESENT && db_claim[i] != sid ->
          held[i] = 0; amb[i] = 0; need_rec = 1
        :: db_state[i] == PRESENT && db_claim[i] == sid -> amb[i] = 0
        fi
      :: else ->
        if
        :: ACK_MATCHES(i, sid) -> ack_commit(i, sid); held[i] = 0
        :: !ACK_MATCHES(i, sid) -> held[i] = 0 /* 0 rows: the claim was lost */
        /* fault: the connection drops around COMMIT; the outcome is
         * unknown to the worker (ambiguous), whether it landed or not */
        :: FAULT_OK && ACK_MATCHES(i, sid) ->
          g_faults++; ack_commit(i, sid); amb[i] = 1
        :: FAULT_OK -> g_faults++; amb[i] = 1
        fi
      fi;
      g_round_due[w] = 1;
      i = 0
    }

  /* ---- settle: the handler failed (OQ__SQL_FAIL_RETRY / _FAIL_DEAD,
   * matched on session and claimed_at) ---- */
  :: atomic {
      (held[0] && !amb[0]) || (held[1] && !amb[1]) ->
      if
      :: held[0] && !amb[0] -> i = 0
      :: held[1] && !amb[1] -> i = 1
      fi;
      if
      :: FAULT_OK -> g_faults++; need_rec = 1 /* lost; dropped */
      :: db_state[i] == PRESENT && db_claim[i] == sid && db_cat[i] == hcat[i] ->
        if
        :: db_att[i] < MAXA -> db_claim[i] = 0
        :: else -> db_state[i] = DEAD; db_claim[i] = 0
        fi
      :: else -> skip /* not ours any more: touches nothing */
      fi;
      held[i] = 0;
      hcat[i] = 0;
      g_round_due[w] = 1;
      i = 0
    }

  /* ---- FENCED: queued and killed jobs are released (OQ__SQL_RELEASE,
   * by identity) ---- */
  :: atomic {
      st != LIVE && ((held[0] && !amb[0]) || (held[1] && !amb[1])) ->
      if
      :: held[0] && !amb[0] -> i = 0
      :: held[1] && !amb[1] -> i = 1
      fi;
      if
      :: db_state[i] == PRESENT && db_claim[i] == sid && db_cat[i] == hcat[i] ->
        db_claim[i] = 0;
        db_att[i]--
      :: else -> skip
      fi;
      held[i] = 0;
      hcat[i] = 0;
      need_rec = 1;
      g_round_due[w] = 1;
      i = 0
    }

  /* ---- the reconciliation sweep (worker/src/reconcile.c): read our
   * claims (OQ__SQL_CLAIMS_OF_SESSION), then release by identity the ones
   * no job holds. Runs when a trigger set need_rec, and at least once per
   * expiry: the periodic run is modelled as "enabled when it would find
   * something" ---- */
  :: atomic {
      SWEEPS && st == LIVE && !rec_phase &&
      (need_rec ||
       (db_state[0] == PRESENT && db_claim[0] == sid && !held[0]) ||
       (db_state[1] == PRESENT && db_claim[1] == sid && !held[1])) ->
      need_rec = 0;
      rec[0] = (db_state[0] == PRESENT && db_claim[0] == sid && !held[0]);
      rcat[0] = db_cat[0];
      rec[1] = (db_state[1] == PRESENT && db_claim[1] == sid && !held[1]);
      rcat[1] = db_cat[1];
      rec_phase = 1
    }
  :: atomic {
      rec_phase ->
      k = 0;
      do
      :: k < N ->
        if
        :: rec[k] && db_state[k] == PRESENT && db_claim[k] == sid &&
           db_cat[k] == rcat[k] ->
          db_claim[k] = 0;
          db_att[k]--;
          g_round_due[w] = 1 /* a draining part may be free now */
        :: else -> skip
        fi;
        rec[k] = 0;
        rcat[k] = 0;
        k++
      :: else -> break
      od;
      k = 0;
      rec_phase = 0
    }
  od
}

/* A part never has two owners: onceq_session_parts has one row per part
 * (db_owner), and no two workers whose sessions still exist believe they
 * own the same part. */
active proctype owners()
{
end:
  atomic {
    (
#ifdef PARTS
      (CLAIMABLE(0, 0) && CLAIMABLE(1, 0) && g_cur[0] != 0 &&
       g_cur[1] != 0 && db_row[g_cur[0]] && db_row[g_cur[1]]) ||
      (CLAIMABLE(0, 1) && CLAIMABLE(1, 1) && g_cur[0] != 0 &&
       g_cur[1] != 0 && db_row[g_cur[0]] && db_row[g_cur[1]]) ||
#endif
      false) ->
    assert(false)
  }
}

/* The invariant the session lock keeps (no foreign key does since schema
 * v8): no item is ever claimed by a session whose row is gone. */
#define ORPHAN(i) (db_state[i] == PRESENT && db_claim[i] != 0 && \
                   !db_row[db_claim[i]])
active proctype orphans()
{
end:
  atomic { (ORPHAN(0) || ORPHAN(1)) -> assert(false) }
}

init
{
  atomic {
    run worker(0);
    run worker(1)
  }
}

#ifdef LIVENESS
/* Every item is eventually acknowledged or dead-lettered (faults are
 * bounded, so they stop). */
ltl eventually_final { <> ALL_FINAL }
#endif
