// The page's virtual clock, installed before any page script runs (an init script).
//
// requestAnimationFrame, performance.now, Date, the timers and requestIdleCallback advance only
// when the recorder calls window.__showcaseClock.stepTo(ms); Math.random is a seeded generator.
// So every clip frame is exactly 1000/fps ms of page time after the previous one, however long
// software GL took to draw it, and the same page gives the same clip.
(() => {
  if (window.__showcaseClock) return;
  const SEED = __SEED__;
  const EPOCH_MS = __EPOCH_MS__;  // what Date.now() says at page time 0 (fixed: same page, same clip)
  const MAX_TIMER_RUNS_PER_STEP = 10000;  // a timer chain that never ends must not hang a step

  const realReportError = typeof window.reportError === "function" ? window.reportError.bind(window) : null;
  const RealDate = Date;
  const RealMessageChannel = MessageChannel;

  let now = 0;  // virtual ms since navigation
  let frameCallbacks = new Map();  // id -> callback, for the next frame
  let nextFrameId = 1;
  const timers = new Map();  // id -> {due, seq, fn, args, interval}
  let nextTimerId = 1;
  let timerSeq = 0;
  let timerNesting = 0;
  const stats = { framesRequested: 0, lastFrameRequestAt: null, callbackErrors: 0, spinReads: 0 };

  // An exception in a page callback is reported exactly as an uncaught one would be (page error,
  // window.onerror), and the other callbacks still run, as in a real browser.
  function invoke(fn, args) {
    try {
      fn.apply(window, args);
    } catch (err) {
      stats.callbackErrors++;
      if (realReportError) realReportError(err);
      else setTimeout(() => { throw err; });
    }
  }

  // A macrotask boundary, so promise continuations of the callbacks run before the next phase
  // (a real event loop runs microtasks after every task).
  const channel = new RealMessageChannel();
  let pendingYield = [];
  channel.port1.onmessage = () => { const r = pendingYield; pendingYield = []; r.forEach((f) => f()); };
  function yieldTask() {
    return new Promise((resolve) => { pendingYield.push(resolve); channel.port2.postMessage(0); });
  }

  // --- requestAnimationFrame -------------------------------------------------------------
  window.requestAnimationFrame = function requestAnimationFrame(cb) {
    const id = nextFrameId++;
    frameCallbacks.set(id, cb);
    stats.framesRequested++;
    stats.lastFrameRequestAt = now;
    return id;
  };
  window.cancelAnimationFrame = function cancelAnimationFrame(id) { frameCallbacks.delete(id); };

  // --- time ----------------------------------------------------------------------------
  // A page that busy-waits on the clock (while (performance.now() < t) {}) would spin forever in a
  // clock that stands still during a step: past SPIN_READS reads in one step, each read advances
  // the clock by 1 us. Normal pages read it a few hundred times per frame and never get there.
  const SPIN_READS = 100000;
  let readsThisStep = 0;
  function read() {
    if (++readsThisStep > SPIN_READS) { now += 0.001; stats.spinReads++; }
    return now;
  }
  const perf = window.performance;
  perf.now = function now_() { return read(); };

  function FakeDate(...args) {
    if (!new.target) return new RealDate(EPOCH_MS + read()).toString();
    return args.length ? new RealDate(...args) : new RealDate(EPOCH_MS + read());
  }
  FakeDate.prototype = RealDate.prototype;
  FakeDate.now = () => EPOCH_MS + Math.floor(read());
  FakeDate.parse = RealDate.parse;
  FakeDate.UTC = RealDate.UTC;
  Object.defineProperty(FakeDate, "name", { value: "Date" });
  window.Date = FakeDate;

  // --- timers --------------------------------------------------------------------------
  function addTimer(fn, delay, args, repeat) {
    if (typeof fn !== "function") { const code = String(fn); fn = () => (0, eval)(code); }
    delay = Number(delay) || 0;
    if (delay < 0) delay = 0;
    // Browsers clamp nested timers to 4 ms; without a floor a setTimeout(f, 0) chain never ends.
    if (timerNesting > 5 && delay < 4) delay = 4;
    const id = nextTimerId++;
    timers.set(id, { due: now + delay, seq: timerSeq++, fn, args, interval: repeat ? Math.max(delay, 1) : null, nesting: timerNesting + 1 });
    return id;
  }
  window.setTimeout = function setTimeout(fn, delay, ...args) { return addTimer(fn, delay, args, false); };
  window.setInterval = function setInterval(fn, delay, ...args) { return addTimer(fn, delay, args, true); };
  window.clearTimeout = window.clearInterval = function clearTimer(id) { timers.delete(id); };
  // An idle callback gets a deadline that allows a fixed amount of work, counted in calls of
  // timeRemaining() (the clock stands still during a step, so time cannot measure it): enough for
  // "while (deadline.timeRemaining() > 0) buildChunk()" loops to progress, the same on every run.
  const IDLE_CHECKS = 8;
  window.requestIdleCallback = function requestIdleCallback(fn) {
    return addTimer(() => {
      let checks = 0;
      fn({ didTimeout: false, timeRemaining: () => (++checks <= IDLE_CHECKS ? 10 : 0) });
    }, 1, [], false);
  };
  window.cancelIdleCallback = function cancelIdleCallback(id) { timers.delete(id); };

  function nextDueTimer(limit) {
    let best = null;
    for (const [id, t] of timers) {
      if (t.due <= limit && (!best || t.due < best[1].due || (t.due === best[1].due && t.seq < best[1].seq))) best = [id, t];
    }
    return best;
  }

  // --- Math.random, seeded (sfc32) -------------------------------------------------------
  let a = 0x9e3779b9, b = 0x243f6a88, c = 0xb7e15162, d = SEED >>> 0;
  function sfc32() {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    let t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    t = (t + d) | 0;
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  }
  for (let i = 0; i < 15; i++) sfc32();
  Math.random = function random() { return sfc32(); };

  // --- the recorder's handle ---------------------------------------------------------------
  Object.defineProperty(window, "__showcaseClock", {
    enumerable: false,
    value: {
      now: () => now,
      // Advance page time to target ms (absolute, so steps never drift by rounding): due timers
      // in order, each at its own due time, then one animation frame at the target time.
      // Resolves with what the page saw.
      async stepTo(target) {
        readsThisStep = 0;
        if (!(target > now)) target = now;
        let runs = 0;
        for (let hit = nextDueTimer(target); hit && runs < MAX_TIMER_RUNS_PER_STEP; hit = nextDueTimer(target), runs++) {
          const [id, t] = hit;
          now = Math.max(now, t.due);
          if (t.interval !== null) { t.due += t.interval; t.seq = timerSeq++; } else timers.delete(id);
          const outer = timerNesting;
          timerNesting = t.nesting;
          invoke(t.fn, t.args);
          timerNesting = outer;
        }
        if (runs) await yieldTask();
        now = Math.max(now, target);
        readsThisStep = 0;
        const callbacks = frameCallbacks;
        frameCallbacks = new Map();
        for (const cb of callbacks.values()) invoke(cb, [now]);
        if (callbacks.size) await yieldTask();
        return { t: perf.now(), spinReads: stats.spinReads, frameCallbacks: callbacks.size, timerRuns: runs, pendingFrames: frameCallbacks.size, pendingTimers: timers.size };
      },
      stats: () => ({ ...stats, pendingFrames: frameCallbacks.size, pendingTimers: timers.size }),
    },
  });
})();
