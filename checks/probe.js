// The in-page probe of the browser check (rubric in checks/rubric.toml).
// Injected by the checker before any page script runs. Nothing of it is reachable from the page:
// its state lives in this closure, the built-ins it depends on are captured here before the page
// can replace them, and its one handle (the `api` object) goes to the checker over CDP (a
// console.debug call with a per-check token, captured before any page script, that the checker
// receives as a remote object through Runtime.consoleAPICalled). The checker calls into `api`
// with Runtime.callFunctionOn; no global names it.
//
// What it counts itself, out of the page's reach: frames of the browser's own animation loop
// (its own requestAnimationFrame, not the page's) in which the page drew with WebGL, and the draw
// calls, instances and triangles of those frames (wrappers on the WebGL prototypes that keep the
// native functions in this closure). What it reads from the page and so only claims, for the
// checker to confirm against real screenshots: the camera through window.scene.onBeforeRender,
// the scene graph's parts and what moves in it, and the page's text.
(() => {
  const TOKEN = '%TOKEN%';
  // --- uncaught errors, seen before any page listener can cancel them (every frame, rubric 3.0) ---
  // A page that cancels its `error` event (preventDefault in a listener, window.onerror returning
  // true) or its `unhandledrejection` leaves no trace in the browser's record (CDP reports nothing).
  // Ours are the first listeners on window, in the capture phase, added before any page script
  // with the built-in addEventListener: at the target, capture listeners run first and in the
  // order added, so no page listener runs before ours, and none can stop ours. Each event is told
  // to the checker at once; a task later, whether the page left it shown (the browser then
  // reports it itself): an event never marked shown counts as a page error the page cancelled.
  (() => {
    const apply = Reflect.apply;
    const debug = console.debug, con = console;
    const own = (proto, name) => Object.getOwnPropertyDescriptor(proto, name).get;
    const prevented = own(Event.prototype, 'defaultPrevented'), targetOf = own(Event.prototype, 'target');
    const message = own(ErrorEvent.prototype, 'message'), filename = own(ErrorEvent.prototype, 'filename');
    const lineno = own(ErrorEvent.prototype, 'lineno');
    const reasonOf = window.PromiseRejectionEvent && own(PromiseRejectionEvent.prototype, 'reason');
    const descriptor = Object.getOwnPropertyDescriptor, protoOf = Object.getPrototypeOf, str = String, slice = String.prototype.slice;
    const timer = window.setTimeout, listen = EventTarget.prototype.addEventListener;
    const frameKey = apply(Math.random, Math, []).toString(36).slice(2, 8);
    const MAX_TOLD = 200;  // a page throwing every frame fails items 1 and 3 long before this
    let told = 0;
    // A rejection's reason, read without running page code (no getter, no toString of the page's).
    const describe = (reason) => {
      const t = typeof reason;
      if (t === 'string' || t === 'number' || t === 'boolean' || t === 'bigint' || t === 'undefined' || reason === null) return str(reason);
      if (t === 'symbol') return 'a symbol';
      for (let o = reason, depth = 0; o && depth < 8; o = protoOf(o), depth++) {
        const d = descriptor(o, 'message');
        if (d) return 'value' in d && typeof d.value === 'string' ? d.value : 'an object';
      }
      return 'an object';
    };
    const seen = (kind, e) => {
      if (!e.isTrusted || told >= MAX_TOLD) return;  // isTrusted is an own, unforgeable property
      let text;
      try {
        if (kind === 'error') {
          if (apply(targetOf, e, []) !== window) return;  // a resource's load error: the request is the record
          text = apply(message, e, []) + ' (' + apply(filename, e, []) + ':' + apply(lineno, e, []) + ')';
        } else {
          text = 'Uncaught (in promise) ' + describe(apply(reasonOf, e, []));
        }
      } catch (err) { return; }  // not the browser's ErrorEvent / PromiseRejectionEvent
      told += 1;
      const id = frameKey + ':' + told;
      apply(debug, con, [TOKEN, 'error', id, kind, apply(slice, text, [0, 300])]);
      apply(timer, window, [() => { if (!apply(prevented, e, [])) apply(debug, con, [TOKEN, 'shown', id]); }, 0]);
    };
    const opts = Object.create(null);
    opts.capture = true;
    apply(listen, window, ['error', (e) => seen('error', e), opts]);
    if (reasonOf) apply(listen, window, ['unhandledrejection', (e) => seen('rejection', e), opts]);
  })();
  // A function of the probe's put in a native's place looks like that native to the page, as a
  // person's browser has it: its name, length and source text (`[native code]`), no prototype, not
  // a constructor (3.0: a page drew its world only where drawElements' source was not native, that
  // is, only for the check).
  const disguise = (() => {
    const apply = Reflect.apply, defineOwn = Reflect.defineProperty;
    const wmGet = WeakMap.prototype.get, wmSet = WeakMap.prototype.set, natives = new WeakMap();
    const fnToString = Function.prototype.toString;
    const put = (wrapper, native) => {
      apply(wmSet, natives, [wrapper, native]);
      defineOwn(wrapper, 'name', { value: native.name, configurable: true });
      defineOwn(wrapper, 'length', { value: native.length, configurable: true });
      return wrapper;
    };
    const toString = { toString() { const n = apply(wmGet, natives, [this]); return apply(fnToString, n !== undefined ? n : this, []); } }.toString;
    Function.prototype.toString = put(toString, fnToString);
    return put;
  })();
  // The WebGL prototypes of this frame (a browser without WebGL 2 has only the first).
  const glProtos = [window.WebGLRenderingContext && WebGLRenderingContext.prototype, window.WebGL2RenderingContext && WebGL2RenderingContext.prototype].filter(Boolean);
  if (window.top !== window) {
    // A frame inside the page: its WebGL natives must not clear the error flag of a context drawn
    // in another document (that would hide refused draws from the top frame's count below).
    const apply = Reflect.apply;
    const canvasOf = (proto) => Object.getOwnPropertyDescriptor(proto, 'canvas').get;
    const ownerOf = Object.getOwnPropertyDescriptor(Node.prototype, 'ownerDocument').get;
    // The native getter's brand check works across frames; an OffscreenCanvas has no document.
    const ownerDoc = (c) => { try { return apply(ownerOf, c, []); } catch (e) { return null; } };
    const doc = document;
    // (3.0) Nor may any other of its WebGL functions act on such a context: uniforms, bindings or
    // draws set through them would be out of the top frame's record of what was drawn with.
    const names = Object.getOwnPropertyNames, describe = Object.getOwnPropertyDescriptor;
    for (const proto of glProtos) {
      const canvas = canvasOf(proto);
      for (const name of names(proto)) {
        const d = describe(proto, name);
        if (name === 'constructor' || !d || typeof d.value !== 'function') continue;
        const orig = d.value;
        proto[name] = disguise({ m(...args) {
          const c = apply(canvas, this, []);
          const owner = c ? ownerDoc(c) : null;
          if (owner && owner !== doc) throw new TypeError('Illegal invocation');
          return apply(orig, this, args);
        } }.m, orig);
      }
    }
    // An extension's functions likewise act only on the extension objects this frame handed out:
    // called on the top frame's object (colorMaskiOES through this frame's prototype), they would
    // change the top frame's context out of its record.
    const mine = new WeakSet(), wrapped = new WeakSet();
    const has = WeakSet.prototype.has, add = WeakSet.prototype.add, protoOf = Object.getPrototypeOf;
    const guardExtension = (p) => {
      if (!p || p === Object.prototype || apply(has, wrapped, [p])) return;
      apply(add, wrapped, [p]);
      for (const name of names(p)) {
        const d = describe(p, name);
        if (name === 'constructor' || !d || typeof d.value !== 'function') continue;
        const orig = d.value;
        p[name] = disguise({ m(...args) {
          if (!apply(has, mine, [this])) throw new TypeError('Illegal invocation');
          return apply(orig, this, args);
        } }.m, orig);
      }
    };
    for (const proto of glProtos) {
      const getExtension = proto.getExtension;
      proto.getExtension = disguise({ m(...args) {
        const ext = apply(getExtension, this, args);
        if (ext !== null && typeof ext === 'object') { apply(add, mine, [ext]); guardExtension(protoOf(ext)); }
        return ext;
      } }.m, getExtension);
    }
    return;
  }
  const apply = Reflect.apply;
  const defineOwn = Reflect.defineProperty;  // an own element, past any setter a page puts on Array.prototype
  const raf = window.requestAnimationFrame;
  const now = performance.now;
  const perf = performance;
  const debug = console.debug;
  const con = console;
  const freeze = Object.freeze;
  // Math's functions as they were before any page script (a page may replace them to bend figures).
  const M = freeze(Object.fromEntries(Object.getOwnPropertyNames(Math).map((k) => [k, Math[k]])));
  const Prom = Promise;
  const setTimer = window.setTimeout;
  const clock = () => apply(now, perf, []);
  const sc = {
    ticks: 0,             // frames of the browser's animation loop (our own requestAnimationFrame)
    frames: 0,            // of those, frames in which the page drew with WebGL
    webglContexts: 0,     // WebGL contexts the page created
    canvas2dContexts: 0,  // 2D contexts the page created
    cur: { calls: 0, draws: 0, parts: 0, triangles: 0, refused: false, per: [] },
    maxFrame: { draws: 0, parts: 0, triangles: 0 },
    canvasMax: [],        // per canvas id: [draws, parts, triangles] of its largest frame
    cameraCounts: new Map(), // camera -> renders of window.scene with it
    mainCamera: null,
    posed: 0,             // renders of the main camera seen since window.scene was hooked
    lastPose: null,
    win: null,
    hooked: null,
    snaps: [],
  };

  // --- per canvas: what a person can see of the world is judged canvas by canvas (showcase/check/visible.py) ---
  // The world's figures per canvas (its largest frame), so that only canvases seen on screen count;
  // pushed to the checker as they grow, like the whole frame's.
  function canvasRises(c) {
    for (let i = 0; i < c.per.length; i++) {
      const e = c.per[i], m = sc.canvasMax[e.cid];
      if (!m || e.draws > m[0] || e.parts > m[1] || e.triangles > m[2]) return true;
    }
    return false;
  }
  function raiseCanvases(c) {
    for (let i = 0; i < c.per.length; i++) {
      const e = c.per[i];
      let m = sc.canvasMax[e.cid];
      if (!m) { m = [0, 0, 0]; defineOwn(sc.canvasMax, e.cid, { value: m, writable: true, enumerable: true, configurable: true }); }
      if (e.draws > m[0] || e.parts > m[1] || e.triangles > m[2]) {
        if (e.draws > m[0]) m[0] = e.draws;
        if (e.parts > m[1]) m[1] = e.parts;
        if (e.triangles > m[2]) m[2] = e.triangles;
        apply(debug, con, [TOKEN, 'cmax', e.cid, m[0], m[1], m[2]]);
      }
    }
  }
  // A frame as the frame-rate item weighs it: the vertices each canvas drew (instances counted;
  // none for a draw to a lost context or into a viewport or scissor box of a few pixels). The
  // checker counts a frame as a picture of the world only when the canvases seen on screen drew
  // a good share of their largest frame of the window in it.
  const FRAME_ROWS = 1200;
  const copyOf = (list) => {
    const out = [];
    for (let i = 0; i < list.length; i++) defineOwn(out, i, { value: list[i], writable: true, enumerable: true, configurable: true });
    return out;
  };
  // A frame asked whether WebGL refused any of its draws carries [-1, CLEAN_FRAME or REFUSED_FRAME],
  // plus ASKED_FOR_CAUSE when it was not asked at random (it raised the figures, or the page
  // itself read an error in it): only those asked at random stand for the frames not asked.
  const CLEAN_FRAME = 1, REFUSED_FRAME = 2, ASKED_FOR_CAUSE = 2;
  const REFUSAL_SAMPLE = 6;  // one frame in this many, on average
  const cryptoObj = crypto, getRandom = cryptoObj.getRandomValues, randomPool = new Uint32Array(64);
  let randomAt = randomPool.length;
  const sampled = () => {
    if (randomAt >= randomPool.length) { apply(getRandom, cryptoObj, [randomPool]); randomAt = 0; }
    return randomPool[randomAt++] % REFUSAL_SAMPLE === 0;
  };
  function noteFrame(c, asked) {
    const w = sc.win;
    if (!w || w.drawn.length >= FRAME_ROWS) return;
    const row = [];
    if (asked !== 0) {
      defineOwn(row, 0, { value: -1, writable: true, enumerable: true, configurable: true });
      defineOwn(row, 1, { value: asked, writable: true, enumerable: true, configurable: true });
    }
    for (let i = 0; i < c.per.length; i++) {
      defineOwn(row, row.length, { value: c.per[i].cid, writable: true, enumerable: true, configurable: true });
      defineOwn(row, row.length, { value: c.per[i].vertices, writable: true, enumerable: true, configurable: true });
    }
    defineOwn(w.drawn, w.drawn.length, { value: row, writable: true, enumerable: true, configurable: true });
  }

  // --- frames: our own animation loop; a frame counts when the page drew in it ---
  const tick = () => {
    sc.ticks += 1;
    viewTick();
    const c = sc.cur;
    const drawn = drawnTo;
    drawnTo = [];
    if (c.calls > 0) {
      sc.frames += 1;
      const m = sc.maxFrame;
      // Only a frame that would raise the world's figures is asked whether WebGL refused any of
      // its draws: a getError per frame waits for the GPU process and slowed a 1.4 fps page to 1.1.
      const rises = c.draws > m.draws || c.parts > m.parts || c.triangles > m.triangles || canvasRises(c);
      if (rises && !refused(c, drawn)) {
        if (c.draws > m.draws) m.draws = c.draws;
        if (c.parts > m.parts) m.parts = c.parts;
        if (c.triangles > m.triangles) m.triangles = c.triangles;
        // Pushed to the checker as they grow, so a page that freezes or leaves keeps them.
        apply(debug, con, [TOKEN, 'max', m.draws, m.parts, m.triangles]);
        raiseCanvases(c);
      }
      // 3.0: in a measuring window, a frame in REFUSAL_SAMPLE (at random: the page cannot tell
      // which) is also asked, so that draws only the GPU process refuses do not pass for frames
      // of the world; the checker weighs the window's frames by the share of those asked that
      // WebGL drew without an error (showcase/check/visible.py: world_frames).
      const known = rises || c.refused, atRandom = !known && sc.win !== null && sampled();
      if (atRandom) refused(c, drawn);
      noteFrame(c, !known && !atRandom ? 0 : (c.refused ? REFUSED_FRAME : CLEAN_FRAME) + (known ? ASKED_FOR_CAUSE : 0));
    }
    sc.cur = { calls: 0, draws: 0, parts: 0, triangles: 0, refused: false, per: [] };
    apply(raf, window, [tick]);
    sc.poll();
  };
  apply(raf, window, [tick]);

  // --- contexts created by the page ---
  const getContextOrig = HTMLCanvasElement.prototype.getContext;
  const counted = new WeakSet();
  const wsHas = WeakSet.prototype.has, wsAdd = WeakSet.prototype.add;
  const reTest = RegExp.prototype.test;
  const webglRe = /webgl/i;
  HTMLCanvasElement.prototype.getContext = disguise({ m(...args) {
    const ctx = apply(getContextOrig, this, args);
    if (ctx && !apply(wsHas, counted, [this])) {
      const type = '' + args[0];
      if (apply(reTest, webglRe, [type])) { sc.webglContexts += 1; apply(wsAdd, counted, [this]); }
      else if (type === '2d') { sc.canvas2dContexts += 1; apply(wsAdd, counted, [this]); }
    }
    return ctx;
  } }.m, getContextOrig);

  // --- draw calls and triangles per frame ---
  // A draw WebGL refuses (no program, buffers too short for the count) throws nothing and draws
  // nothing: counted as it is called, it would claim any number of triangles for free. So a frame
  // that would raise the world's figures first asks getError of each context the page drew to in
  // it; with an error (or one the page itself read in that frame) it does not count toward the
  // world's size. The error we read is held for the page: its own next getError on that context
  // returns it.
  const NO_ERROR = 0;
  const held = new WeakMap();
  const wmGet = WeakMap.prototype.get, wmSet = WeakMap.prototype.set, wmDelete = WeakMap.prototype.delete;
  let drawnTo = [];  // {ctx, getError} of the contexts drawn to in this frame
  const refused = (c, list) => {
    for (let i = 0; i < list.length; i++) {
      let e = NO_ERROR;
      try { e = apply(list[i].getError, list[i].ctx, []); } catch (err) { e = NO_ERROR; }
      if (e !== NO_ERROR) {
        c.refused = true;
        if (apply(wmGet, held, [list[i].ctx]) === undefined) apply(wmSet, held, [list[i].ctx, e]);
      }
    }
    return c.refused;
  };
  const trianglesOf = (mode, count) => (mode === 4 ? M.floor(count / 3) : mode === 5 || mode === 6 ? (count > 2 ? count - 2 : 0) : 0);
  // Each canvas drawn to gets a number (pictures, figures and frames are kept per canvas), and a
  // picture of its first drawn frame: a page that draws once and never again (preserveDrawingBuffer
  // false) can be pictured only while that frame is drawn.
  const canvasIds = new WeakMap();
  let nextCanvasId = 0;
  const FIRST_PICTURES = 8;
  const canvasId = (ctx, canvasGet) => {
    const known = apply(wmGet, canvasIds, [ctx]);
    if (known !== undefined) return known;
    const cid = nextCanvasId++;
    apply(wmSet, canvasIds, [ctx, cid]);
    if (canPicture && firsts.length < FIRST_PICTURES) {
      const pic = { taken: true, pending: 1, list: [], shares: null, seq: 0, sent: false, first: pictures.length };
      defineOwn(firsts, firsts.length, { value: pic, writable: true, enumerable: true, configurable: true });
      const one = [{ ctx, canvas: canvasGet, cid }];
      apply(microtask, window, [() => { try { takeEach(pic, one); } finally { ended(pic); } }]);
    }
    return cid;
  };
  // Per context, what decides where a draw can write and whether it writes any colour, as the page
  // set it through these wrappers: the viewport and scissor box (a frame's draws weigh the share of
  // the canvas they can reach), the colour mask, blending, rasterizer discard and face culling (a
  // draw that provably writes no colour shows nothing: colorWrite false, a blend that keeps the
  // destination). Draw buffer 0 is the one that reaches the screen: OES_draw_buffers_indexed's
  // per-buffer calls count for it. Each argument is converted once, before the native call, and the
  // native gets the converted value (a valueOf read twice could tell WebGL one thing and us another).
  const targets = new WeakMap();
  const TINY_PIXELS = 64;
  const SCISSOR_TEST = 0x0C11, BLEND = 0x0BE2, CULL_FACE = 0x0B44, RASTERIZER_DISCARD = 0x8C89;
  const FRONT_AND_BACK = 0x0408, ZERO = 0, ONE = 1, FUNC_ADD = 0x8006, FUNC_REVERSE_SUBTRACT = 0x800B;
  const DEPTH_TEST = 0x0B71, STENCIL_TEST = 0x0B90, SAMPLE_COVERAGE = 0x80A0, NEVER = 0x0200, LESS = 0x0201, ALWAYS = 0x0207;
  const FRONT = 0x0404, BACK = 0x0405, NONE = 0;
  const CONSTANT_COLOR = 0x8001, ONE_MINUS_CONSTANT_COLOR = 0x8002, CONSTANT_ALPHA = 0x8003, ONE_MINUS_CONSTANT_ALPHA = 0x8004;
  const tinyTarget = (ctx) => {
    const t = apply(wmGet, targets, [ctx]);
    if (t === undefined) return false;
    return (t.vw !== null && t.vw * t.vh < TINY_PIXELS) || (t.scissor && t.sw !== null && t.sw * t.sh < TINY_PIXELS);
  };
  const targetOf = (ctx) => {
    let t = apply(wmGet, targets, [ctx]);
    if (t === undefined) {
      t = { vx: 0, vy: 0, vw: null, vh: null, sx: 0, sy: 0, sw: null, sh: null, scissor: false,
        rgb: true, alpha: true, blend: false, keepRgb: false, keepAlpha: false, discard: false, cull: false, allFaces: false,
        srcRgb: ONE, dstRgb: ZERO, srcAlpha: ONE, dstAlpha: ZERO, eqRgb: FUNC_ADD, eqAlpha: FUNC_ADD,
        cr: 0, cg: 0, cb: 0, ca: 0, depthTest: false, depthFunc: LESS, stencilTest: false, stencilFront: ALWAYS,
        stencilBack: ALWAYS, coverage: false, coverNone: false, drawNone: false };
      apply(wmSet, targets, [ctx, t]);
    }
    return t;
  };
  // The share of the drawing buffer a draw can reach: its viewport, within the scissor box when the
  // scissor test is on (unset, each is the whole buffer). A draw to a framebuffer is measured
  // against the drawing buffer too: a pass at the canvas's size reaches all of it.
  const reachOf = (t, W, H) => {
    if (t === undefined) return W > 0 && H > 0 ? 1 : 0;
    return t.vw !== null ? shareIn(t, W, H, t.vx, t.vy, t.vx + t.vw, t.vy + t.vh) : shareIn(t, W, H, 0, 0, W, H);
  };
  // The share of a W x H buffer that the rectangle [x0, x1) x [y0, y1) covers within the buffer and,
  // when the scissor test is on, within the scissor box (a draw's viewport, a blit's destination).
  const shareIn = (t, W, H, x0, y0, x1, y1) => {
    if (!(W > 0 && H > 0)) return 0;
    x0 = M.max(x0, 0); y0 = M.max(y0, 0); x1 = M.min(x1, W); y1 = M.min(y1, H);
    if (t !== undefined && t.scissor && t.sw !== null) { x0 = M.max(x0, t.sx); y0 = M.max(y0, t.sy); x1 = M.min(x1, t.sx + t.sw); y1 = M.min(y1, t.sy + t.sh); }
    return x1 > x0 && y1 > y0 ? ((x1 - x0) * (y1 - y0)) / (W * H) : 0;
  };
  // A blend leaves the destination as it was when it takes none of the source and all of the
  // destination, by a factor of zero and one or by the blend colour's (3.0: blendColor(0, 0, 0, 0)
  // with CONSTANT_ALPHA and ONE_MINUS_CONSTANT_ALPHA kept a 360-block decoy off the screen).
  const zeroOf = (f, t, alpha) => f === ZERO || ((f === CONSTANT_ALPHA || (alpha && f === CONSTANT_COLOR)) && t.ca <= 0) ||
    (!alpha && f === CONSTANT_COLOR && t.cr <= 0 && t.cg <= 0 && t.cb <= 0);
  const oneOf = (f, t, alpha) => f === ONE || ((f === ONE_MINUS_CONSTANT_ALPHA || (alpha && f === ONE_MINUS_CONSTANT_COLOR)) && t.ca <= 0) ||
    (!alpha && f === ONE_MINUS_CONSTANT_COLOR && t.cr <= 0 && t.cg <= 0 && t.cb <= 0);
  const keeps = (t, eq, src, dst, alpha) => (eq === FUNC_ADD || eq === FUNC_REVERSE_SUBTRACT) && zeroOf(src, t, alpha) && oneOf(dst, t, alpha);
  const reblend = (t) => { t.keepRgb = keeps(t, t.eqRgb, t.srcRgb, t.dstRgb, false); t.keepAlpha = keeps(t, t.eqAlpha, t.srcAlpha, t.dstAlpha, true); };
  // 3.0: a draw no fragment of which can pass: the depth test or the stencil test set to NEVER (for
  // both faces; points and lines face front), a sample coverage of none, or the screen's one draw
  // buffer set to NONE (a touring camera drawn so passed for the view on screen).
  const passesNone = (t, mode, toScreen) => (t.depthTest && t.depthFunc === NEVER) ||
    (t.stencilTest && t.stencilFront === NEVER && (t.stencilBack === NEVER || !(mode >= 4 && mode <= 6))) ||
    (t.coverage && t.coverNone) || (toScreen && t.drawNone);
  const writesNothing = (t, mode, toScreen) => t !== undefined && (t.discard || (t.cull && t.allFaces && mode >= 4 && mode <= 6) ||
    passesNone(t, mode, toScreen) || ((!t.rgb || (t.blend && t.keepRgb)) && (!t.alpha || (t.blend && t.keepAlpha))));
  const setCap = (t, cap, on) => {
    if (cap === SCISSOR_TEST) t.scissor = on;
    else if (cap === BLEND) t.blend = on;
    else if (cap === CULL_FACE) t.cull = on;
    else if (cap === RASTERIZER_DISCARD) t.discard = on;
    else if (cap === DEPTH_TEST) t.depthTest = on;
    else if (cap === STENCIL_TEST) t.stencilTest = on;
    else if (cap === SAMPLE_COVERAGE) t.coverage = on;
  };
  const setStencil = (t, face, func) => {
    if (face === FRONT || face === FRONT_AND_BACK) t.stencilFront = func;
    if (face === BACK || face === FRONT_AND_BACK) t.stencilBack = func;
  };
  const numbers = (args, n) => { for (let k = 0; k < n && k < args.length; k++) args[k] = +args[k]; };
  // wrap(proto, name, n, fn): the first n arguments made numbers (the rest booleans when `flags`), then fn(state, args) after the native call
  const wrapState = (obj, name, n, fn, flags, ctxFor) => {
    const orig = obj[name];
    if (typeof orig !== 'function') return;
    obj[name] = disguise({ m(...args) {
      numbers(args, n);
      if (flags) for (let k = n; k < args.length; k++) args[k] = !!args[k];
      const out = apply(orig, this, args);
      const ctx = ctxFor ? apply(wmGet, extCtx, [this]) : this;
      if (ctx !== undefined) { try { fn(targetOf(ctx), args); } catch (e) { /* never break the page */ } }
      return out;
    } }.m, orig);
  };
  const u32 = (v) => v >>> 0;
  const wrapTarget = (proto) => {
    // a negative size is refused by WebGL and changes nothing
    wrapState(proto, 'viewport', 4, (t, a) => { if ((a[2] | 0) >= 0 && (a[3] | 0) >= 0) { t.vx = a[0] | 0; t.vy = a[1] | 0; t.vw = a[2] | 0; t.vh = a[3] | 0; } });
    wrapState(proto, 'scissor', 4, (t, a) => { if ((a[2] | 0) >= 0 && (a[3] | 0) >= 0) { t.sx = a[0] | 0; t.sy = a[1] | 0; t.sw = a[2] | 0; t.sh = a[3] | 0; } });
    wrapState(proto, 'enable', 1, (t, a) => setCap(t, u32(a[0]), true));
    wrapState(proto, 'disable', 1, (t, a) => setCap(t, u32(a[0]), false));
    wrapState(proto, 'colorMask', 0, (t, a) => { t.rgb = a[0] || a[1] || a[2]; t.alpha = a[3]; }, true);
    wrapState(proto, 'cullFace', 1, (t, a) => { t.allFaces = u32(a[0]) === FRONT_AND_BACK; });
    wrapState(proto, 'blendFunc', 2, (t, a) => { t.srcRgb = t.srcAlpha = u32(a[0]); t.dstRgb = t.dstAlpha = u32(a[1]); reblend(t); });
    wrapState(proto, 'blendFuncSeparate', 4, (t, a) => { t.srcRgb = u32(a[0]); t.dstRgb = u32(a[1]); t.srcAlpha = u32(a[2]); t.dstAlpha = u32(a[3]); reblend(t); });
    wrapState(proto, 'blendEquation', 1, (t, a) => { t.eqRgb = t.eqAlpha = u32(a[0]); reblend(t); });
    wrapState(proto, 'blendEquationSeparate', 2, (t, a) => { t.eqRgb = u32(a[0]); t.eqAlpha = u32(a[1]); reblend(t); });
    // WebGL clamps the blend colour to [0, 1]
    wrapState(proto, 'blendColor', 4, (t, a) => { t.cr = a[0]; t.cg = a[1]; t.cb = a[2]; t.ca = a[3]; reblend(t); });
    wrapState(proto, 'depthFunc', 1, (t, a) => { t.depthFunc = u32(a[0]); });
    wrapState(proto, 'stencilFunc', 3, (t, a) => setStencil(t, FRONT_AND_BACK, u32(a[0])));
    wrapState(proto, 'stencilFuncSeparate', 4, (t, a) => setStencil(t, u32(a[0]), u32(a[1])));
    wrapState(proto, 'sampleCoverage', 1, (t, a) => { t.coverNone = a[1] ? a[0] >= 1 : a[0] <= 0; }, true);
    wrapDrawBuffers(proto, 'drawBuffers', false);
  };
  // drawBuffers: the list read once and handed to WebGL as read; on the screen (no framebuffer
  // bound), [NONE] leaves it no draw buffer. Each framebuffer keeps its own list: a draw into one
  // is held until a draw to the screen shows it.
  const wrapDrawBuffers = (obj, name, ofExtension) => {
    const orig = obj[name];
    if (typeof orig !== 'function') return;
    obj[name] = disguise({ m(...args) {
      let list = null;
      if (args.length) { list = listOf(args[0]); if (list !== null) args[0] = list; }
      const out = apply(orig, this, args);
      const ctx = ofExtension ? apply(wmGet, extCtx, [this]) : this;
      if (ctx !== undefined && list !== null && ctxOf(ctx).drawFb === null && list.length === 1) {
        try { targetOf(ctx).drawNone = list[0] === NONE; } catch (e) { /* never break the page */ }
      }
      return out;
    } }.m, orig);
  };
  // The extensions the probe follows act on the context their object came from (getExtension's
  // `this`), noted before the page holds the object: their functions may be called on the object
  // alone. Their prototypes are wrapped when the page first gets one.
  const extCtx = new WeakMap();   // an extension object -> its context
  const ctxKits = new WeakMap();  // a context -> the natives its draws are counted with
  const lower = String.prototype.toLowerCase, protoOf = Object.getPrototypeOf;
  const wrapExtensions = (proto, kit) => {
    const getExtension = proto.getExtension;
    if (typeof getExtension !== 'function') return;
    proto.getExtension = disguise({ m(...args) {
      if (args.length) args[0] = '' + args[0];
      const ext = apply(getExtension, this, args);
      const name = ext ? apply(lower, args[0], []) : '';
      const wrap = name === 'oes_draw_buffers_indexed' ? wrapIndexed : name === 'angle_instanced_arrays' ? wrapInstancedArrays
        : name === 'webgl_multi_draw' ? wrapMultiDraw : name === 'webgl_draw_buffers' ? wrapDrawBuffersExt : null;
      if (wrap !== null) {
        apply(wmSet, extCtx, [ext, this]);
        apply(wmSet, ctxKits, [this, kit]);
        wrap(protoOf(ext));
      }
      return ext;
    } }.m, getExtension);
  };
  const extProtos = new WeakSet();
  const firstTime = (p) => {
    if (!p || apply(wsHas, extProtos, [p])) return false;
    apply(wsAdd, extProtos, [p]);
    return true;
  };
  const wrapDrawBuffersExt = (p) => { if (firstTime(p)) wrapDrawBuffers(p, 'drawBuffersWEBGL', true); };
  const wrapIndexed = (p) => {
    if (!firstTime(p)) return;
    const at0 = (fn) => (t, a) => { if (u32(a[0]) === 0) fn(t, a); };
    wrapState(p, 'enableiOES', 2, (t, a) => { if (u32(a[1]) === 0) setCap(t, u32(a[0]), true); }, false, true);
    wrapState(p, 'disableiOES', 2, (t, a) => { if (u32(a[1]) === 0) setCap(t, u32(a[0]), false); }, false, true);
    wrapState(p, 'colorMaskiOES', 1, at0((t, a) => { t.rgb = a[1] || a[2] || a[3]; t.alpha = a[4]; }), true, true);
    wrapState(p, 'blendFunciOES', 3, at0((t, a) => { t.srcRgb = t.srcAlpha = u32(a[1]); t.dstRgb = t.dstAlpha = u32(a[2]); reblend(t); }), false, true);
    wrapState(p, 'blendFuncSeparateiOES', 5, at0((t, a) => { t.srcRgb = u32(a[1]); t.dstRgb = u32(a[2]); t.srcAlpha = u32(a[3]); t.dstAlpha = u32(a[4]); reblend(t); }), false, true);
    wrapState(p, 'blendEquationiOES', 2, at0((t, a) => { t.eqRgb = t.eqAlpha = u32(a[1]); reblend(t); }), false, true);
    wrapState(p, 'blendEquationSeparateiOES', 3, at0((t, a) => { t.eqRgb = u32(a[1]); t.eqAlpha = u32(a[2]); reblend(t); }), false, true);
  };
  // Per WebGL prototype, the natives its contexts' draws are counted with (a WebGL 1 getter refuses
  // a WebGL 2 context, and an extension's draw is counted against its own context).
  const kitOf = (proto) => {
    const get = (name) => Object.getOwnPropertyDescriptor(proto, name).get;
    return freeze({ getError: proto.getError, isLost: proto.isContextLost, canvas: get('canvas'), linked: proto.getProgramParameter,
      bufW: get('drawingBufferWidth'), bufH: get('drawingBufferHeight') });
  };
  // One call's draws as they reach the screen, whatever entry point made them: `n` draws of
  // counts[countsAt + i] vertices, each insts[instsAt + i] times (once when insts is null). A plain
  // draw is one; a multi-draw is its list. A draw of no vertex or no instance draws nothing and
  // counts nothing (a multi-draw of 5,000 empty draws is no world).
  // A program's link status: as the page asked it, or asked of WebGL once per link at the
  // program's first draw (asked at the link, it would wait for a compile the page lets run in
  // parallel). A program deleted before anyone asked is taken as linked: asking would raise an
  // error in the page's context.
  const LINK_STATUS = 0x8B82;
  const linkedOk = (getParameter, ctx, progObj) => {
    const p = progOf(progObj);
    if (p.linked === undefined && !p.deleted) {
      try { p.linked = !!apply(getParameter, ctx, [progObj, LINK_STATUS]); } catch (e) { p.linked = true; }
    }
    return p.linked !== false;
  };
  const countDraws = (ctx, kit, mode, n, counts, countsAt, insts, instsAt) => {
    if (armed !== null) {
      // A window's opening picture: what WebGL drew in this frame, once the page's callback is over.
      const pic = armed;
      armed = null;
      pic.taken = true;
      pic.pending += 1;  // until takePicture has started its pictures: none is read half-taken
      apply(microtask, window, [() => takePicture(pic)]);
    }
    mode >>>= 0;  // as WebGL converts a GLenum
    const c = sc.cur;
    c.calls += 1;
    const cid = canvasId(ctx, kit.canvas);
    let seen = false;
    for (let i = 0; i < drawnTo.length; i++) if (drawnTo[i].ctx === ctx) seen = true;
    if (!seen) defineOwn(drawnTo, drawnTo.length, { value: { ctx, getError: kit.getError, canvas: kit.canvas, cid }, writable: true, enumerable: true, configurable: true });
    // A lost context draws nothing (a decoy lost on purpose raised the world's figures), a draw
    // into a viewport or scissor box of a few pixels shows nothing of a world, and one that
    // writes no colour (colorWrite false: a 43,200-triangle mesh counted) shows nothing at all.
    const target = apply(wmGet, targets, [ctx]);
    const st = ctxOf(ctx);
    if (apply(kit.isLost, ctx, []) || tinyTarget(ctx) || writesNothing(target, mode >>> 0, st.drawFb === null)) return;
    // 3.0: a draw WebGL refuses before it starts (no program in use, one whose link failed, no
    // such mode) draws nothing: frames of them between real ones read as 60 frames a second. What
    // only the GPU process refuses is caught by the frames sampled in `tick`.
    if (!(mode >= 0 && mode <= 6) || st.progObj === null || !linkedOk(kit.linked, ctx, st.progObj)) { c.calls -= 1; return; }
    let draws = 0, parts = 0, tris = 0, vertices = 0;
    for (let i = 0; i < n; i++) {
      const count = counts[countsAt + i], inst = insts === null ? 1 : insts[instsAt + i];
      if (!(count > 0 && inst > 0)) continue;
      draws += 1;
      parts += inst;
      tris += trianglesOf(mode, count) * inst;
      vertices += count * inst;
    }
    if (draws === 0) return;
    c.draws += draws;
    // 3.0: only a draw with a transform giving depth is part of a world (a flat quad is a picture)
    const deep = st.prog !== null && st.prog.deep > 0;
    const worldParts = deep ? parts : 0, worldTris = deep ? tris : 0;
    if (rec !== null && rec.ops.length < REC_MAX) { try { recordOp(ctx, st, tris, kit.bufW, kit.bufH); } catch (e) { /* a sample the less */ } }
    const e = entryOf(c, cid);
    // a frame's vertices weigh the share of the canvas their draw can reach: the world drawn into
    // a 9 x 9 scissor box in five frames of six counted as 60 frames a second
    const got = sampledHeld(st);
    const v = vertices * reachOf(target, apply(kit.bufW, ctx, []), apply(kit.bufH, ctx, [])) + got.v;
    e.draws += draws;
    // what is drawn into a framebuffer is held until a draw or blit of the frame shows it (3.0: its
    // parts and triangles too: 360 blocks drawn into a target blitted into one pixel were world)
    if (st.drawFb !== null) hold(st.drawFb, v, worldParts + got.parts, worldTris + got.tris);
    else shown(c, e, v, worldParts + got.parts, worldTris + got.tris);
  };
  const shown = (c, e, v, parts, tris) => {
    e.vertices += v; e.parts += parts; e.triangles += tris;
    c.parts += parts; c.triangles += tris;
  };
  const ONE_COUNT = new Int32Array(1), ONE_INST = new Int32Array(1);
  // A draw whose count (and instances) are arguments: drawArrays and its kin, and an extension's
  // (kit null: `this` is the extension object, the draw is its context's).
  const wrapDraw = (obj, name, countArg, instArg, kit) => {
    const orig = obj[name];
    if (typeof orig !== 'function') return;
    obj[name] = disguise({ m(...args) {
      // Numbers once (the native takes them so): a count read twice could draw one and claim another.
      numbers(args, args.length);
      // The native call first: one on anything but a real context throws and counts nothing.
      const out = apply(orig, this, args);
      const ctx = kit === null ? apply(wmGet, extCtx, [this]) : this;
      if (ctx === undefined) return out;
      ONE_COUNT[0] = args[countArg];
      ONE_INST[0] = instArg === null ? 1 : args[instArg];
      countDraws(ctx, kit === null ? apply(wmGet, ctxKits, [ctx]) : kit, args[0], 1, ONE_COUNT, 0, ONE_INST, 0);
      return out;
    } }.m, orig);
  };
  const wrapInstancedArrays = (p) => {
    if (!firstTime(p)) return;
    wrapDraw(p, 'drawArraysInstancedANGLE', 2, 3, null);
    wrapDraw(p, 'drawElementsInstancedANGLE', 1, 4, null);
  };
  // WEBGL_multi_draw: a call is `drawcount` draws whose counts (and instances) are read from lists,
  // each from its offset. Every list is copied once, before the native call, and the native gets
  // the copy: an array's getters or iterator, read again by WebGL, could draw one list and claim
  // another. A call WebGL refuses for its bounds (a negative drawcount, an offset at or past its
  // list's end, a drawcount past it) draws nothing and counts none; a call counts its first
  // MULTI_MAX draws at most.
  const MULTI_MAX = 1 << 16;
  const LIST_MAX = 1 << 22;  // an array longer than this is passed on as it is, and its call counts nothing
  const I32 = Int32Array, isArray = Array.isArray;
  const typedLength = Object.getOwnPropertyDescriptor(protoOf(I32.prototype), 'length').get;
  const listOf = (v) => {
    if (apply(typedTag, v, []) !== undefined) return new I32(v);  // converted as WebGL converts a list
    if (!isArray(v)) return null;
    const n = +v.length;
    if (!(n >= 0 && n <= LIST_MAX)) return null;
    const out = new I32(n);
    for (let i = 0; i < n; i++) out[i] = +v[i];
    return out;
  };
  // lists: the arguments that are lists (each followed by its offset)
  const wrapMulti = (p, name, lists, countsArg, instsArg, drawcountArg) => {
    const orig = p[name];
    if (typeof orig !== 'function') return;
    const isList = new I32(drawcountArg + 1);
    for (let j = 0; j < lists.length; j++) isList[lists[j]] = 1;
    const listArgs = new I32(lists.length);  // filled by hand: no page-replaced iterator is asked
    for (let j = 0; j < lists.length; j++) listArgs[j] = lists[j];
    p[name] = disguise({ m(...args) {
      let known = true;
      for (let k = 0; k < args.length; k++) {
        if (isList[k] !== 1) { args[k] = +args[k]; continue; }
        const list = listOf(args[k]);
        if (list === null) known = false; else args[k] = list;
      }
      const out = apply(orig, this, args);
      const ctx = apply(wmGet, extCtx, [this]);
      if (ctx === undefined) return out;
      const drawcount = args[drawcountArg] | 0;
      let n = known && drawcount > 0 ? drawcount : 0;
      for (let j = 0; j < listArgs.length && n > 0; j++) {
        const len = apply(typedLength, args[listArgs[j]], []), off = args[listArgs[j] + 1] >>> 0;
        if (off >= len || n > len - off) n = 0;
      }
      if (n > MULTI_MAX) n = MULTI_MAX;
      const insts = instsArg === null ? null : args[instsArg], instsAt = instsArg === null ? 0 : args[instsArg + 1] >>> 0;
      countDraws(ctx, apply(wmGet, ctxKits, [ctx]), args[0], n, args[countsArg], args[countsArg + 1] >>> 0, insts, instsAt);
      return out;
    } }.m, orig);
  };
  const wrapMultiDraw = (p) => {
    if (!firstTime(p)) return;
    wrapMulti(p, 'multiDrawArraysWEBGL', [1, 3], 3, null, 5);
    wrapMulti(p, 'multiDrawElementsWEBGL', [1, 4], 1, null, 6);
    wrapMulti(p, 'multiDrawArraysInstancedWEBGL', [1, 3, 5], 3, 5, 7);
    wrapMulti(p, 'multiDrawElementsInstancedWEBGL', [1, 4, 6], 1, 6, 8);
  };
  const entryOf = (c, cid) => {
    for (let i = 0; i < c.per.length; i++) if (c.per[i].cid === cid) return c.per[i];
    const e = { cid, draws: 0, parts: 0, triangles: 0, vertices: 0 };
    defineOwn(c.per, c.per.length, { value: e, writable: true, enumerable: true, configurable: true });
    return e;
  };
  // What a frame draws into a framebuffer reaches the screen only through a later draw of the same
  // frame with its texture bound (post-processing, shadow maps; a blit passes it on): until then its
  // vertices are held per framebuffer, and one never shown adds nothing to the frame (the world
  // drawn into a hidden target in the frames between real ones).
  const heldFb = new WeakMap();  // framebuffer -> { tick, v, parts, tris } of the frame being drawn
  const hold = (fb, v, parts, tris) => {
    let h = apply(wmGet, heldFb, [fb]);
    if (h === undefined || h.tick !== sc.ticks) { h = { tick: sc.ticks, v: 0, parts: 0, tris: 0 }; apply(wmSet, heldFb, [fb, h]); }
    h.v += v; h.parts += parts; h.tris += tris;
  };
  // what a framebuffer holds of this frame, added to `into` (and no longer held)
  const release = (fb, into) => {
    const h = apply(wmGet, heldFb, [fb]);
    if (h === undefined || h.tick !== sc.ticks) return into;
    into.v += h.v; into.parts += h.parts; into.tris += h.tris;
    h.v = 0; h.parts = 0; h.tris = 0;
    return into;
  };
  const sampledHeld = (st) => {
    const got = { v: 0, parts: 0, tris: 0 };
    for (const k in st.units) {
      const tex = st.units[k], fb = tex ? apply(wmGet, texFbs, [tex]) : undefined;
      if (fb !== undefined) release(fb, got);
    }
    return got;
  };
  const wrapGetError = (proto, getError) => {
    proto.getError = disguise({ m() {
      const e = apply(wmGet, held, [this]);
      if (e !== undefined) { apply(wmDelete, held, [this]); return e; }
      const now_ = apply(getError, this, []);
      if (now_ !== NO_ERROR) sc.cur.refused = true;
      return now_;
    } }.m, getError);
  };
  for (const proto of glProtos) {
    const kit = kitOf(proto);
    wrapGetError(proto, kit.getError);
    wrapTarget(proto);
    wrapExtensions(proto, kit);
    wrapDraw(proto, 'drawArrays', 2, null, kit);
    wrapDraw(proto, 'drawElements', 1, null, kit);
    wrapDraw(proto, 'drawArraysInstanced', 2, 3, kit);
    wrapDraw(proto, 'drawElementsInstanced', 1, 4, kit);
    wrapDraw(proto, 'drawRangeElements', 3, null, kit);  // WebGL 2: (mode, start, end, count, type, offset)
  }

  // --- the view WebGL really drew with (3.0) ---
  // A camera object is whatever a page says it is: the one handed to window.scene.onBeforeRender
  // need not be the one anything is drawn with. What is drawn with is in WebGL's own record: the
  // 4 x 4 matrices in effect at every draw (uniformMatrix4fv, kept per program and uniform name),
  // and where each draw went: the screen, or a framebuffer whose texture a later draw that reaches
  // the screen sampled (post-processing, shadow maps; a blit passes it on). In a measuring window
  // the probe records one frame's draws every VIEW.sample_ms ("a sample"), on the target nearest
  // the screen that drew with a transform giving depth, and compares it with the samples before:
  // - kept: the share of the window's first sample's draws drawn again with the very same matrices
  //   (a view that did not move keeps them all, whatever else appears or changes in place);
  // - explained: of the previous sample's draws (weighed by their share of the screen times what
  //   they draw), the share found again moved exactly as the claimed camera moved (its view
  //   V_k V_(k-1)^-1 times each matrix); the camera is the one drawn with when that explains more
  //   than a view that did not move would (the share drawn unchanged);
  // - without a camera that explains them, the draws' common motion is looked for (candidates from
  //   a few draws' own matrices), so a view that moves is told from things that move in it;
  // - beyond: draws the view's motion does not explain that were there before and moved, or that
  //   lay well inside the view before (new; not merely entering it at an edge as it turns).
  // A draw with no matrix giving depth (a perspective, or z moving points across the screen) is
  // drawn flat: its parts and triangles are no world, and a picture drawn only so is flat, as a 2D
  // canvas is.
  const VIEW = %VIEW_RULES%;
  const F32 = Float32Array, F64 = Float64Array;
  const typedTag = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), Symbol.toStringTag).get;
  const arrSort = Array.prototype.sort;
  const put = (a, v) => {
    const d = bare(null); d.value = v; d.writable = true; d.enumerable = true; d.configurable = true;
    defineOwn(a, a.length, d);
  };
  const locNames = new WeakMap();    // uniform location -> [program, name]
  const progStates = new WeakMap();  // program -> {mats: name -> {v, deep}, deep: how many give depth}
  const ctxStates = new WeakMap();   // context -> its bindings, as the probe saw them set
  const texFbs = new WeakMap();      // texture -> the framebuffer it is attached to
  const progOf = (p) => {
    let s = apply(wmGet, progStates, [p]);
    if (s === undefined) { s = bare(null); s.mats = bare(null); s.deep = 0; apply(wmSet, progStates, [p, s]); }
    return s;
  };
  const ctxOf = (ctx) => {
    let s = apply(wmGet, ctxStates, [ctx]);
    if (s === undefined) {
      s = bare(null); s.prog = null; s.progObj = null; s.drawFb = null; s.readFb = null; s.vp = null; s.unit = 0; s.units = bare(null);
      apply(wmSet, ctxStates, [ctx, s]);
    }
    return s;
  };
  // Column-major, as WebGL takes them: a perspective row, or z moving points across the screen.
  const givesDepth = (v) => M.abs(v[3]) + M.abs(v[7]) + M.abs(v[11]) > 1e-7 ||
    M.abs(v[8]) + M.abs(v[9]) > 1e-6 * (M.abs(v[0]) + M.abs(v[5]) + M.abs(v[10]));
  const perspective = (v) => M.abs(v[3]) + M.abs(v[7]) + M.abs(v[11]) > 1e-7;
  // `prep` reads the arguments once, before the native call, and hands the native what it read:
  // a page's array or object read twice could tell WebGL one thing and the record another.
  const after = (proto, name, fn, prep) => {
    const orig = proto && proto[name];
    if (typeof orig !== 'function') return;
    proto[name] = disguise({ m(...args) {
      if (prep) prep(args);
      const out = apply(orig, this, args);
      try { fn(this, args, out); } catch (e) { /* never break the page */ }
      return out;
    } }.m, orig);
  };
  const FRAMEBUFFER = 0x8D40, READ_FB = 0x8CA8, DRAW_FB = 0x8CA9, TEXTURE0 = 0x84C0, COLOR_BUFFER_BIT = 0x4000;
  for (const proto of glProtos) {
    after(proto, 'getUniformLocation', (ctx, a, loc) => {
      if (loc && typeof a[1] === 'string') apply(wmSet, locNames, [loc, [a[0], a[1]]]);
    });
    // WebGL refuses a program that is deleted or did not link, and keeps the one in use.
    const getParameter = proto.getProgramParameter;
    after(proto, 'useProgram', (ctx, a) => {
      if (a[0] && (progOf(a[0]).deleted || !linkedOk(getParameter, ctx, a[0]))) return;
      const s = ctxOf(ctx); s.progObj = a[0] || null; s.prog = a[0] ? progOf(a[0]) : null;
    });
    after(proto, 'linkProgram', (ctx, a) => { if (a[0]) { const p = progOf(a[0]); p.mats = bare(null); p.deep = 0; p.linked = undefined; } });
    after(proto, 'deleteProgram', (ctx, a) => { if (a[0]) progOf(a[0]).deleted = true; });
    after(proto, 'getProgramParameter', (ctx, a, out) => {
      if (a[0] && a[1] === LINK_STATUS && typeof out === 'boolean') progOf(a[0]).linked = out;
    }, (a) => { if (a.length > 1) a[1] = +a[1]; });
    after(proto, 'uniformMatrix4fv', (ctx, a) => {
      const info = a[0] ? apply(wmGet, locNames, [a[0]]) : undefined;
      const s = ctxOf(ctx);
      // a location of another program is refused by WebGL: nothing is set
      if (info === undefined || s.prog === null || info[0] !== s.progObj) return;
      const data = a[2], off = a[3] > 0 ? a[3] | 0 : 0;
      let e = s.prog.mats[info[1]];
      if (e === undefined) { e = bare(null); e.v = new F32(16); e.deep = false; s.prog.mats[info[1]] = e; }
      const v = e.v;
      if (a[1]) { for (let r = 0; r < 4; r++) for (let c = 0; c < 4; c++) v[c * 4 + r] = +data[off + r * 4 + c]; }
      else for (let k = 0; k < 16; k++) v[k] = +data[off + k];
      const deep = givesDepth(v);
      if (deep !== e.deep) { s.prog.deep += deep ? 1 : -1; e.deep = deep; }
    }, (a) => {
      a[1] = !!a[1];
      if (a.length > 3 && a[3] !== undefined) a[3] = +a[3];
      if (a.length > 4 && a[4] !== undefined) a[4] = +a[4];
      if (apply(typedTag, a[2], []) !== 'Float32Array' && a[2] !== null && typeof a[2] === 'object') {
        const n = M.min(+a[2].length | 0, 65536), copy = new F32(n > 0 ? n : 0);
        for (let k = 0; k < n; k++) copy[k] = +a[2][k];
        a[2] = copy;
      }
    });
    after(proto, 'bindFramebuffer', (ctx, a) => {
      const s = ctxOf(ctx), fb = a[1] || null;
      if (a[0] === FRAMEBUFFER) { s.drawFb = fb; s.readFb = fb; } else if (a[0] === DRAW_FB) s.drawFb = fb; else if (a[0] === READ_FB) s.readFb = fb;
    });
    const attach = (ctx, target, tex) => {
      const s = ctxOf(ctx), fb = target === READ_FB ? s.readFb : s.drawFb;
      if (tex && fb) apply(wmSet, texFbs, [tex, fb]);
    };
    after(proto, 'framebufferTexture2D', (ctx, a) => attach(ctx, a[0], a[3]));
    after(proto, 'framebufferTextureLayer', (ctx, a) => attach(ctx, a[0], a[2]));
    after(proto, 'activeTexture', (ctx, a) => { ctxOf(ctx).unit = (a[0] | 0) - TEXTURE0; });
    after(proto, 'bindTexture', (ctx, a) => { const s = ctxOf(ctx); s.units[s.unit * 65536 + (a[0] | 0)] = a[1] || null; });
    after(proto, 'viewport', (ctx, a) => { ctxOf(ctx).vp = [a[0], a[1], a[2], a[3]]; },
      (a) => { for (let k = 0; k < 4; k++) a[k] = +a[k]; });
    // A blit passes on what it copies as far as its destination reaches (3.0): the world blitted
    // into one pixel, or past the buffer's edge, or without the colour bit, shows nothing of it.
    const blitKit = kitOf(proto);
    after(proto, 'blitFramebuffer', (ctx, a) => {
      const s = ctxOf(ctx), got = { v: 0, parts: 0, tris: 0 };
      if (s.readFb !== null) release(s.readFb, got);
      const W = apply(blitKit.bufW, ctx, []), H = apply(blitKit.bufH, ctx, []);
      const t = apply(wmGet, targets, [ctx]);
      const share = a[8] & COLOR_BUFFER_BIT ? shareIn(t, W, H, M.min(a[4], a[6]), M.min(a[5], a[7]), M.max(a[4], a[6]), M.max(a[5], a[7])) : 0;
      // a few pixels show nothing of a world (as a viewport of a few pixels)
      const v = got.v * share, seen = share * W * H >= TINY_PIXELS;
      const parts = seen ? got.parts : 0, tris = seen ? got.tris : 0;
      if (s.drawFb !== null) { if (v > 0 || parts > 0) hold(s.drawFb, v, parts, tris); }
      else if (v > 0 || parts > 0) { const cid = apply(wmGet, canvasIds, [ctx]); if (cid !== undefined) shown(sc.cur, entryOf(sc.cur, cid), v, parts, tris); }
      if (rec !== null) recordOp(ctx, ctxOf(ctx), -1, null, null);
    }, (a) => { for (let k = 0; k < 10 && k < a.length; k++) a[k] = +a[k]; });
  }

  // --- samples: one frame's draws, as they went ---
  const REC_MAX = 4000;  // draws kept of one frame (a frame of more is judged on its first ones)
  let rec = null;        // the frame being recorded, or null
  const recordOp = (ctx, s, tris, bufW, bufH) => {
    const op = bare(null);
    op.screen = s.drawFb === null;
    op.t = op.screen ? ctx : s.drawFb;
    op.depth = -1;
    if (tris < 0) { op.blit = true; op.from = s.readFb; put(rec.ops, op); return; }
    op.blit = false;
    op.w = 1;
    if (op.screen && s.vp !== null) {
      // a draw into a corner of the screen weighs its share of it (a 1-pixel viewport, nothing)
      const W = apply(bufW, ctx, []), H = apply(bufH, ctx, []), vp = s.vp;
      const x0 = M.max(0, vp[0]), y0 = M.max(0, vp[1]), x1 = M.min(W, vp[0] + vp[2]), y1 = M.min(H, vp[1] + vp[3]);
      op.w = W > 0 && H > 0 ? (M.max(0, x1 - x0) * M.max(0, y1 - y0)) / (W * H) : 0;
    }
    op.deep = s.prog !== null && s.prog.deep > 0;
    op.tris = tris;
    // what a draw weighs in comparisons: its share of the screen, times what it draws (a tiny
    // object drawn with some other view weighs little beside the world)
    op.tw = op.w * (1 + tris);
    op.mats = [];
    op.fp = 0;
    if (s.prog !== null) {
      let j = 0;
      for (const name in s.prog.mats) {
        const src = s.prog.mats[name].v, v = new F64(16);
        for (let k = 0; k < 16; k++) v[k] = src[k];
        put(op.mats, [name, v]);
        op.fp += keyOf(v) * (j + 1.5);
        j++;
      }
    }
    op.src = null;
    for (const k in s.units) {
      const tex = s.units[k], fb = tex ? apply(wmGet, texFbs, [tex]) : undefined;
      if (fb !== undefined) { if (op.src === null) op.src = []; put(op.src, fb); }
    }
    put(rec.ops, op);
  };
  const KW = new F64(16);
  let KWSUM = 0;
  for (let i = 0; i < 16; i++) { KW[i] = 1 + ((i * 0.6180339887) % 1); KWSUM += KW[i]; }
  const keyOf = (v) => { let k = 0; for (let i = 0; i < 16; i++) k += v[i] * KW[i]; return k; };
  const tolOf = (v) => { let m = 0; for (let i = 0; i < 16; i++) m = M.max(m, M.abs(v[i])); return 1e-4 * (1 + m); };
  const close = (a, b, tol) => { for (let i = 0; i < 16; i++) if (!(M.abs(a[i] - b[i]) <= tol)) return false; return true; };
  const mul = (a, b) => {
    const o = new F64(16);
    for (let c = 0; c < 4; c++) for (let r = 0; r < 4; r++) o[c * 4 + r] = a[r] * b[c * 4] + a[4 + r] * b[c * 4 + 1] + a[8 + r] * b[c * 4 + 2] + a[12 + r] * b[c * 4 + 3];
    return o;
  };
  const inv = (m) => {
    const a00 = m[0], a01 = m[1], a02 = m[2], a03 = m[3], a10 = m[4], a11 = m[5], a12 = m[6], a13 = m[7];
    const a20 = m[8], a21 = m[9], a22 = m[10], a23 = m[11], a30 = m[12], a31 = m[13], a32 = m[14], a33 = m[15];
    const b00 = a00 * a11 - a01 * a10, b01 = a00 * a12 - a02 * a10, b02 = a00 * a13 - a03 * a10, b03 = a01 * a12 - a02 * a11;
    const b04 = a01 * a13 - a03 * a11, b05 = a02 * a13 - a03 * a12, b06 = a20 * a31 - a21 * a30, b07 = a20 * a32 - a22 * a30;
    const b08 = a20 * a33 - a23 * a30, b09 = a21 * a32 - a22 * a31, b10 = a21 * a33 - a23 * a31, b11 = a22 * a33 - a23 * a32;
    const det = b00 * b11 - b01 * b10 + b02 * b09 + b03 * b08 - b04 * b07 + b05 * b06;
    if (!(M.abs(det) > 1e-30)) return null;
    const d = 1 / det, o = new F64(16);
    o[0] = (a11 * b11 - a12 * b10 + a13 * b09) * d; o[1] = (a02 * b10 - a01 * b11 - a03 * b09) * d;
    o[2] = (a31 * b05 - a32 * b04 + a33 * b03) * d; o[3] = (a22 * b04 - a21 * b05 - a23 * b03) * d;
    o[4] = (a12 * b08 - a10 * b11 - a13 * b07) * d; o[5] = (a00 * b11 - a02 * b08 + a03 * b07) * d;
    o[6] = (a32 * b02 - a30 * b05 - a33 * b01) * d; o[7] = (a20 * b05 - a22 * b02 + a23 * b01) * d;
    o[8] = (a10 * b10 - a11 * b08 + a13 * b06) * d; o[9] = (a01 * b08 - a00 * b10 - a03 * b06) * d;
    o[10] = (a30 * b04 - a31 * b02 + a33 * b00) * d; o[11] = (a21 * b02 - a20 * b04 - a23 * b00) * d;
    o[12] = (a11 * b07 - a10 * b09 - a12 * b06) * d; o[13] = (a00 * b09 - a01 * b07 + a02 * b06) * d;
    o[14] = (a31 * b01 - a30 * b03 - a32 * b00) * d; o[15] = (a20 * b03 - a21 * b01 + a22 * b00) * d;
    return o;
  };
  const IDENTITY = new F64(16);
  IDENTITY[0] = 1; IDENTITY[5] = 1; IDENTITY[10] = 1; IDENTITY[15] = 1;
  const copy16 = (e) => { const o = new F64(16); for (let i = 0; i < 16; i++) o[i] = +e[i]; return o; };

  // Which targets reached the screen: walked backwards, a screen draw reaches it (depth 0), a
  // draw that sampled a framebuffer's texture passes its reach on to that framebuffer's earlier
  // draws (one deeper), a blit passes it to the framebuffer it read.
  const reach = (ops) => {
    const reached = [];
    const depthOf = (t) => { for (let i = 0; i < reached.length; i++) if (reached[i][0] === t) return reached[i][1]; return -1; };
    for (let i = ops.length - 1; i >= 0; i--) {
      const op = ops[i];
      const d = op.screen ? 0 : depthOf(op.t);
      op.depth = d;
      if (d < 0) continue;
      if (op.blit) { if (op.from && depthOf(op.from) < 0) put(reached, [op.from, d]); continue; }
      if (op.src !== null) for (let k = 0; k < op.src.length; k++) if (depthOf(op.src[k]) < 0) put(reached, [op.src[k], d + 1]);
    }
  };
  // The target nearest the screen that drew with a transform giving depth (most draws on a tie).
  const mainTarget = (ops) => {
    const cands = [];
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i];
      if (op.blit || op.depth < 0 || !op.deep || !(op.w > 0)) continue;
      let c = null;
      for (let k = 0; k < cands.length; k++) if (cands[k][0] === op.t) c = cands[k];
      if (c === null) put(cands, [op.t, op.depth, 1]);
      else { c[2] += 1; if (op.depth < c[1]) c[1] = op.depth; }
    }
    let best = null;
    for (let k = 0; k < cands.length; k++) {
      const c = cands[k];
      if (best === null || c[1] < best[1] || (c[1] === best[1] && c[2] > best[2])) best = c;
    }
    return best === null ? null : best[0];
  };
  const sampleOf = (ops, target, r) => {
    const s = bare(null);
    s.t = target; s.draws = []; s.idx = bare(null); s.fps = bare(null); s.view = r.view; s.world = r.world;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i];
      if (op.blit || op.t !== target || op.depth < 0) continue;
      put(s.draws, op);
      s.fps[op.fp] = 1;
      for (let k = 0; k < op.mats.length; k++) {
        const name = op.mats[k][0], v = op.mats[k][1];
        if (s.idx[name] === undefined) s.idx[name] = [];
        put(s.idx[name], [keyOf(v), v]);
      }
    }
    for (const name in s.idx) apply(arrSort, s.idx[name], [(a, b) => a[0] - b[0]]);
    return s;
  };
  // Is Y (within rounding) among the sample's matrices of that name?
  const lookup = (s, name, Y) => {
    const arr = s.idx[name];
    if (arr === undefined) return false;
    const k = keyOf(Y), tol = tolOf(Y), kt = tol * KWSUM * 1.01;
    let lo = 0, hi = arr.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (arr[mid][0] < k - kt) lo = mid + 1; else hi = mid; }
    for (let i = lo; i < arr.length && arr[i][0] <= k + kt; i++) if (close(arr[i][1], Y, tol)) return true;
    return false;
  };
  // Was draw d (of an earlier record) drawn in `cur` moved by D? Each of its matrices is found
  // there again either moved by D or unchanged (a projection, a model matrix), and at least one
  // moved: a draw found again all unchanged is the still view's, one with a matrix found nowhere
  // (a node that turned) moved beyond D.
  const movedBy = (cur, d, D) => {
    let moved = false;
    for (let k = 0; k < d.mats.length; k++) {
      const name = d.mats[k][0], X = d.mats[k][1], Y = mul(D, X);
      if (!close(Y, X, tolOf(X)) && lookup(cur, name, Y)) { moved = true; continue; }
      if (!lookup(cur, name, X)) return false;
    }
    return moved;
  };
  // Of the reference draws the motion D would change (weighed by op.tw), the share drawn in `cur`
  // moved by D, and the share drawn there unchanged (what a view that did not move explains);
  // null when D changes none (no motion to test).
  const explainShare = (ref, cur, D) => {
    let T = 0, E = 0, K = 0;
    for (let i = 0; i < ref.draws.length; i++) {
      const d = ref.draws[i];
      if (!(d.tw > 0)) continue;
      let testable = false;
      for (let k = 0; k < d.mats.length && !testable; k++) if (!close(mul(D, d.mats[k][1]), d.mats[k][1], tolOf(d.mats[k][1]))) testable = true;
      if (!testable) continue;
      T += d.tw;
      if (cur.fps[d.fp] === 1) K += d.tw;
      else if (movedBy(cur, d, D)) E += d.tw;
    }
    return T > 0 ? [E / T, K / T] : null;
  };
  const pickEven = (arr, n) => {
    if (arr.length <= n) return arr;
    const out = [];
    for (let i = 0; i < n; i++) put(out, arr[M.floor((i * arr.length) / n)]);
    return out;
  };
  const matOf = (d, name) => { for (let k = 0; k < d.mats.length; k++) if (d.mats[k][0] === name) return d.mats[k][1]; return null; };
  // The common motion of what was drawn: candidates D = Y X^-1 from a few reference draws and the
  // current draws with a matrix of the same name; the one that explains most reference draws.
  const findMotion = (ref, cur) => {
    const anchors = pickEven(ref.draws, 4), partners = pickEven(cur.draws, 400), probes = pickEven(ref.draws, 12);
    const top = [];  // [count, D], best first, at most 3
    for (let a = 0; a < anchors.length; a++) {
      for (let k = 0; k < anchors[a].mats.length; k++) {
        const name = anchors[a].mats[k][0], Xi = inv(anchors[a].mats[k][1]);
        if (Xi === null) continue;
        for (let p = 0; p < partners.length; p++) {
          const Y = matOf(partners[p], name);
          if (Y === null) continue;
          const D = mul(Y, Xi);
          if (close(D, IDENTITY, 1e-5)) continue;
          let n = 0;
          for (let q = 0; q < probes.length; q++) {
            const e = probes[q];
            if (movedBy(cur, e, D)) n++;
            if (n + probes.length - 1 - q < (top.length === 3 ? top[2][0] : 1)) break;  // cannot make the top three
          }
          if (n < 2 || n * 4 < probes.length) continue;
          put(top, [n, D]);
          apply(arrSort, top, [(x, y) => y[0] - x[0]]);
          if (top.length > 3) top.length = 3;
        }
      }
    }
    let best = null;
    for (let i = 0; i < top.length; i++) {
      const r = explainShare(ref, cur, top[i][1]);
      if (r !== null && (best === null || r[0] > best[1])) best = [top[i][1], r[0]];
    }
    return best;
  };
  // A draw's own transform: with a perspective matrix beside it, the other one (the one named for
  // a view when there are several: three.js also uploads a modelMatrix); else its only matrix.
  const viewRe = /view/i;
  const ownOf = (d) => {
    let P = null, X = null;
    for (let k = 0; k < d.mats.length; k++) if (P === null && perspective(d.mats[k][1])) P = d.mats[k][1];
    for (let k = 0; k < d.mats.length; k++) {
      const v = d.mats[k][1];
      if (v !== P && (X === null || apply(reTest, viewRe, [d.mats[k][0]]))) X = v;
    }
    return [P, X];
  };
  // Where the draw's model origin lay in the view before (moved back by Di): well inside it, not at
  // an edge it may have entered by as the view turned. Unknown (no matrix) counts as inside.
  const insideBefore = (d, Di) => {
    const own = ownOf(d), P = own[0], X = own[1];
    const c = new F64(4);
    if (P !== null && X !== null) {
      const x = mul(Di, X);
      for (let r = 0; r < 4; r++) c[r] = P[r] * x[12] + P[4 + r] * x[13] + P[8 + r] * x[14] + P[12 + r] * x[15];
    } else if (P !== null || X !== null) {
      const x = mul(Di, P !== null ? P : X);
      for (let r = 0; r < 4; r++) c[r] = x[12 + r];
    } else return true;
    if (!(c[3] > 1e-9)) return false;
    const lim = VIEW.inside;
    return M.abs(c[0] / c[3]) <= lim && M.abs(c[1] / c[3]) <= lim && c[2] / c[3] >= -1 && c[2] / c[3] <= 1;
  };
  // Was the draw there before, moved a little (turned in place, stepped along)? A draw of as many
  // triangles, no longer found, whose own transform's origin lay within a quarter of its distance.
  const movedFrom = (d, Di, lost) => {
    const Y = ownOf(d)[1];
    if (Y === null) return false;
    const y = mul(Di, Y);
    for (let i = 0; i < lost.length; i++) {
      if (lost[i].tris !== d.tris) continue;
      const X = ownOf(lost[i])[1];
      if (X === null) continue;
      if (M.hypot(y[12] - X[12], y[13] - X[13], y[14] - X[14]) <= 0.25 * M.hypot(X[12], X[13], X[14]) + 1e-9) return true;
    }
    return false;
  };
  const foundIn = (s, d, D) => s.fps[d.fp] === 1 || (D !== IDENTITY && movedBy(s, d, D));
  // Draws now that the view's motion D (from prev to cur) does not explain, and that were there
  // before and moved, or lay well inside the view before (new, not entering at an edge).
  const beyondCount = (prev, cur, D) => {
    const Di = D === IDENTITY ? IDENTITY : inv(D);
    if (Di === null) return null;
    const lost = [];
    for (let i = 0; i < prev.draws.length && lost.length < 400; i++) {
      const x = prev.draws[i];
      if (x.w > 0 && !foundIn(cur, x, D)) put(lost, x);
    }
    let n = 0;
    for (let i = 0; i < cur.draws.length; i++) {
      const y = cur.draws[i];
      if (!(y.w > 0) || foundIn(prev, y, Di)) continue;
      if (movedFrom(y, Di, lost) || insideBefore(y, Di)) n++;
    }
    return n;
  };
  // kept: against the window's first sample; the view's motion and what moved beyond it: against
  // the sample before (half a second: little enters or leaves the view in it).
  const compareSamples = (v, first, prev, cur) => {
    let W = 0, kept = 0;
    for (let i = 0; i < first.draws.length; i++) { const d = first.draws[i]; if (d.w > 0) { W += d.w; if (cur.fps[d.fp] === 1) kept += d.w; } }
    if (!(W > 0)) return;
    v.compared += 1;
    const K = kept / W;
    if (v.keptMin === null || K < v.keptMin) v.keptMin = K;
    let Wp = 0, keptPrev = 0;
    for (let i = 0; i < prev.draws.length; i++) { const d = prev.draws[i]; if (d.w > 0) { Wp += d.w; if (cur.fps[d.fp] === 1) keptPrev += d.w; } }
    const still = Wp > 0 && keptPrev / Wp >= VIEW.min_kept;
    // The claimed camera is the one drawn with when its motion explains more of what was drawn
    // than a view that did not move would (a camera nobody draws with explains nothing, and what
    // was drawn stayed as it was); an honest view explains all but what moves in the world.
    let Dc = null, drawnWith = false;
    if (prev.view !== null && cur.view !== null) {
      Dc = mul(cur.view, prev.world);
      const r = explainShare(prev, cur, Dc);
      if (r !== null) {
        v.claimed += 1;
        drawnWith = r[0] > r[1];
        if (drawnWith) v.confirmed += 1;
        if (v.claimedMax === null || r[0] > v.claimedMax) v.claimedMax = r[0];
        if (v.claimedMin === null || r[0] < v.claimedMin) v.claimedMin = r[0];
        if (v.stillMax === null || r[1] > v.stillMax) v.stillMax = r[1];
      }
    }
    let De = null;
    if (!still && !drawnWith) {
      const f = findMotion(prev, cur);
      if (f !== null) {
        if (v.foundMax === null || f[1] > v.foundMax) v.foundMax = f[1];
        if (f[1] >= VIEW.min_found) De = f[0];
      }
    }
    const D = still ? IDENTITY : drawnWith ? Dc : De;
    const b = D === null ? null : beyondCount(prev, cur, D);
    if (b === null) v.beyondUnknown += 1;
    else { v.beyondKnown += 1; if (b > v.beyondMax) v.beyondMax = b; }
  };
  const newView = () => {
    const v = bare(null);
    v.ref = null; v.prev = null; v.lastT = -1e12; v.samples = 0; v.compared = 0; v.deep = false; v.keptMin = null;
    v.claimed = 0; v.confirmed = 0; v.claimedMax = null; v.claimedMin = null; v.stillMax = null; v.foundMax = null;
    v.beyondMax = 0; v.beyondKnown = 0; v.beyondUnknown = 0; v.switched = 0; v.truncated = false;
    return v;
  };
  const finishSample = (r) => {
    const w = r.win, v = w.view;
    if (sc.win !== w) return;  // its window closed meanwhile
    let drew = false;
    for (let i = 0; i < r.ops.length && !drew; i++) if (!r.ops[i].blit) drew = true;
    if (!drew) return;  // a frame that drew nothing: the next one is taken instead
    v.lastT = r.t;
    v.samples += 1;
    if (r.ops.length >= REC_MAX) v.truncated = true;
    reach(r.ops);
    const target = mainTarget(r.ops);
    if (target === null) return;  // drawn flat: nothing to compare
    v.deep = true;
    const s = sampleOf(r.ops, target, r);
    if (v.ref === null) { v.ref = s; v.prev = s; return; }
    // the same role may go to another framebuffer from frame to frame (post-processing swaps its
    // two targets): the records compare what the main target drew, wherever it went
    if (s.t !== v.prev.t) v.switched += 1;
    compareSamples(v, v.ref, v.prev, s);
    v.prev = s;
  };
  // At each of our frames: the frame recorded is finished; a new one is recorded when a window
  // wants its first sample or VIEW.sample_ms have passed since its last.
  const viewTick = () => {
    if (rec !== null) { const r = rec; rec = null; try { finishSample(r); } catch (e) { /* a broken sample is none */ } }
    const w = sc.win;
    if (!w || !w.view || w.view.samples >= VIEW.max_samples) return;
    if (w.view.samples === 0 || clock() - w.view.lastT >= VIEW.sample_ms) {
      rec = bare(null); rec.ops = []; rec.win = w; rec.view = null; rec.world = null; rec.t = clock();
    }
  };
  const viewSummary = (w) => {
    const v = w.view;
    if (!v) return null;
    return {
      samples: v.samples, compared: v.compared, deep: v.deep, draws: v.ref ? v.ref.draws.length : 0,
      kept: v.keptMin, claimed: v.claimed, confirmed: v.confirmed, claimed_explained: v.claimedMax,
      claimed_explained_min: v.claimedMin, still_explained: v.stillMax,
      found_explained: v.foundMax,
      // evidence of change beyond the view's motion counts when seen; none only when every compared sample could tell
      beyond: v.beyondMax > 0 ? v.beyondMax : v.compared > 0 && v.beyondUnknown === 0 ? 0 : null,
      switched: v.switched, truncated: v.truncated,
    };
  };

  // --- what WebGL itself drew: a small picture of each canvas at the opening of every window ---
  // The screenshots that bound a window show the whole page, which CSS, the DOM or a 2D canvas
  // change without WebGL drawing anything new (a sliding CSS gradient under a fake camera earned
  // the tour, animation and controls). So the first frame the page draws in each window is also
  // taken from its WebGL canvases, right after the page's callback drew it and before it is
  // presented; a window's WebGL change is its opening picture against the next one's. Taken
  // asynchronously (createImageBitmap resized, VideoFrame.copyTo): a readback in the page's
  // frame waits for the GPU process, and a few a second cost a 50 fps page a third of its frames.
  const PIC_W = 128, PIC_H = 72;
  const makeBitmap = window.createImageBitmap;
  const VF = window.VideoFrame;
  const vfCopyTo = VF && VF.prototype.copyTo, vfClose = VF && VF.prototype.close, vfSize = VF && VF.prototype.allocationSize;
  const vfFormat = VF && Object.getOwnPropertyDescriptor(VF.prototype, 'format').get;
  const bmClose = window.ImageBitmap && ImageBitmap.prototype.close;
  const rectOf = Element.prototype.getBoundingClientRect;
  const rectGet = (k) => Object.getOwnPropertyDescriptor(DOMRectReadOnly.prototype, k).get;
  const rectX = rectGet('x'), rectY = rectGet('y'), rectW = rectGet('width'), rectH = rectGet('height');
  const then = Promise.prototype.then;
  const microtask = window.queueMicrotask;
  const bare = Object.create;  // option objects without a prototype: no setter of the page's is read
  const U8 = Uint8Array;
  const PIC_BYTES = PIC_W * PIC_H * 4;
  const byteLength = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(U8.prototype), 'length').get;
  const canPicture = typeof makeBitmap === 'function' && typeof vfCopyTo === 'function' && typeof microtask === 'function';
  const pictures = [];  // one per window opened, in order: {taken, pending, list: [{canvas, cid, rect, data, format}], shares, seq, sent}
  const firsts = [];    // a canvas's first drawn frame (canvasId above): {..., first: windows opened before it}
  let armed = null;     // the picture waiting for the page's next drawn frame
  let pictureSeq = 0;   // the order pictures were taken in
  const openPicture = () => {
    const pic = { taken: false, pending: 0, list: [], shares: null, seq: 0, sent: false };
    defineOwn(pictures, pictures.length, { value: pic, writable: true, enumerable: true, configurable: true });
    armed = canPicture ? pic : null;
  };
  const ended = (pic) => { pic.pending -= 1; if (pic.pending === 0) sc.poll(); };
  const takePicture = (pic) => {
    try { takeEach(pic, drawnTo); } finally { ended(pic); }  // ended: the hold taken with the frame
  };
  const takeEach = (pic, drawn) => {
    pic.seq = ++pictureSeq;
    for (let i = 0; i < drawn.length; i++) {
      const canvas = apply(drawn[i].canvas, drawn[i].ctx, []), cid = drawn[i].cid;
      let rect = null;
      try {
        const r = apply(rectOf, canvas, []);
        rect = [apply(rectX, r, []), apply(rectY, r, []), apply(rectW, r, []), apply(rectH, r, [])];
      } catch (e) { continue; }  // an OffscreenCanvas is on no screen
      let made;
      try {
        const opts = bare(null);
        opts.resizeWidth = PIC_W; opts.resizeHeight = PIC_H;
        made = apply(makeBitmap, window, [canvas, opts]);
      } catch (e) { continue; }
      apply(then, made, [(bitmap) => {
        let frame = null;
        try { const init = bare(null); init.timestamp = 0; frame = new VF(bitmap, init); } catch (e) { frame = null; }
        try { apply(bmClose, bitmap, []); } catch (e) { /* closed already */ }
        if (frame === null) { ended(pic); return; }
        let data, format = null;
        try { data = new U8(apply(vfSize, frame, [])); format = '' + apply(vfFormat, frame, []); } catch (e) { apply(vfClose, frame, []); ended(pic); return; }
        const done = (ok) => {
          try { apply(vfClose, frame, []); } catch (e) { /* closed already */ }
          if (ok && apply(byteLength, data, []) === PIC_BYTES) defineOwn(pic.list, pic.list.length, { value: { canvas, cid, rect, data, format }, writable: true, enumerable: true, configurable: true });
          ended(pic);
        };
        try { apply(then, apply(vfCopyTo, frame, [data]), [() => done(true), () => done(false)]); } catch (e) { done(false); }
      }, () => ended(pic)]);
      pic.pending += 1;  // after `then` took the callbacks (they run later): a throw leaves no hold
    }
  };
  // Share of a picture's pixels that differ by more than 10 in some channel (item 4's tolerance).
  // Both are PIC_BYTES long (checked when kept; a typed array's length getter is the page's to replace).
  const changedShare = (a, b) => {
    let n = 0;
    for (let k = 0; k < PIC_BYTES; k += 4) {
      if (M.abs(a[k] - b[k]) > 10 || M.abs(a[k + 1] - b[k + 1]) > 10 || M.abs(a[k + 2] - b[k + 2]) > 10 || M.abs(a[k + 3] - b[k + 3]) > 10) n++;
    }
    return n / (PIC_BYTES / 4);
  };
  // Window i's WebGL change: per canvas, [share of its picture changed, x, y, width, height] from
  // the last picture drawn up to the window's opening to the next window's opening picture. A
  // canvas without an earlier picture counts no change (a fresh canvas in each window, showing the
  // same thing, must not pass for motion). null while a picture it needs is still being taken, or
  // the page has drawn no frame since the next window opened (unknown).
  const sharesOf = (i) => {
    const pic = pictures[i], next = pictures[i + 1];
    if (!pic || !next || !next.taken || next.pending > 0) return null;
    if (pic.shares) return pic.shares;
    let ref = null;
    for (let j = i; j >= 0 && ref === null; j--) {
      if (pictures[j].pending > 0) return null;
      if (pictures[j].list.length) ref = pictures[j];
    }
    const out = [];
    for (let k = 0; k < next.list.length; k++) {
      const now_ = next.list[k];
      let before = null;
      if (ref) for (let q = 0; q < ref.list.length; q++) if (ref.list[q].canvas === now_.canvas) before = ref.list[q];
      const share = before ? changedShare(before.data, now_.data) : 0;
      defineOwn(out, out.length, { value: [share, now_.rect[0], now_.rect[1], now_.rect[2], now_.rect[3]], writable: true, enumerable: true, configurable: true });
    }
    pic.shares = out;
    return out;
  };
  // The pictures themselves go to the checker once each, when complete (base64 of the RGBA bytes,
  // built with functions kept before any page script), so it can compare them with the screenshots
  // (showcase/check/visible.py): [window index or -1, windows opened before it, its order taken,
  // [[canvas id, x, y, width, height, pixel format, base64], ...]].
  const b64 = window.btoa;
  const byteChars = [];
  for (let k = 0; k < 256; k++) defineOwn(byteChars, k, { value: apply(String.fromCharCode, String, [k]), writable: false, enumerable: true, configurable: false });
  const encode = (data) => {
    let s = '';
    for (let k = 0; k < PIC_BYTES; k++) s += byteChars[data[k]];
    return apply(b64, window, [s]);
  };
  const deliver = (out, pic, index, first) => {
    if (pic.sent || !pic.taken || pic.pending > 0) return;
    pic.sent = true;
    const rows = [];
    for (let k = 0; k < pic.list.length; k++) {
      const e = pic.list[k];
      defineOwn(rows, rows.length, { value: [e.cid, e.rect[0], e.rect[1], e.rect[2], e.rect[3], e.format, encode(e.data)], writable: true, enumerable: true, configurable: true });
    }
    defineOwn(out, out.length, { value: [index, first, pic.seq, rows], writable: true, enumerable: true, configurable: true });
  };
  const glChanges = () => {
    const out = [], pics = [];
    for (let i = 0; i + 1 < pictures.length; i++) defineOwn(out, i, { value: sharesOf(i), writable: true, enumerable: true, configurable: true });
    for (let i = 0; i < pictures.length; i++) deliver(pics, pictures[i], i, i);
    for (let i = 0; i < firsts.length; i++) deliver(pics, firsts[i], -1, firsts[i].first);
    return { available: canPicture, windows: out, pictures: pics };
  };
  // Resolves once the last picture was taken and none is still being taken, or after maxMs.
  const glSettled = (maxMs) => new Prom((resolve) => {
    const t0 = clock();
    const check = () => {
      let busy = pictures.length > 0 && canPicture && !pictures[pictures.length - 1].taken;
      for (let i = 0; i < pictures.length; i++) if (pictures[i].pending > 0) busy = true;
      for (let i = 0; i < firsts.length; i++) if (firsts[i].pending > 0) busy = true;
      if (busy && clock() - t0 < maxMs) return false;
      resolve({ gl: glChanges() });
      return true;
    };
    if (check()) return;
    defineOwn(sc.waiters, sc.waiters.length, { value: check, writable: true, enumerable: true, configurable: true });
    apply(setTimer, window, [() => { if (check()) sc.poll(); }, maxMs + 1]);
  });
  // Resolves once the open window's opening picture is taken (the page drew a frame since it
  // opened), or after maxMs. The checker sends a step's input only then: on a page drawing under
  // 1 fps the input could otherwise reach the page before its first frame in the step, and the
  // picture that should show the view before the input would show the answer already (3.0).
  const pictured = (maxMs) => new Prom((resolve) => {
    const t0 = clock();
    const check = () => {
      if (armed !== null && clock() - t0 < maxMs) return false;
      resolve(armed === null);
      return true;
    };
    if (check()) return;
    defineOwn(sc.waiters, sc.waiters.length, { value: check, writable: true, enumerable: true, configurable: true });
    apply(setTimer, window, [() => { if (check()) sc.poll(); }, maxMs + 1]);
  });

  // --- camera pose through window.scene.onBeforeRender ---
  const poseOf = (m) => {
    const e = m.elements;
    const cols = [[e[0], e[1], e[2]], [e[4], e[5], e[6]], [e[8], e[9], e[10]]].map((c) => {
      const n = M.hypot(c[0], c[1], c[2]) || 1;
      return [c[0] / n, c[1] / n, c[2] / n];
    });
    return { p: [e[12], e[13], e[14]], r: cols };
  };
  // Zoom without moving (fov or zoom changed) counts like a move along the view axis.
  const lensOf = (camera) => (camera.isPerspectiveCamera ? camera.fov / (camera.zoom || 1) : 1 / (camera.zoom || 1));
  const angleDeg = (a, b) => {
    // rotation angle of a^T b from its trace
    let tr = 0;
    for (let i = 0; i < 3; i++) tr += a.r[i][0] * b.r[i][0] + a.r[i][1] * b.r[i][1] + a.r[i][2] * b.r[i][2];
    const c = M.min(1, M.max(-1, (tr - 1) / 2));
    return (M.acos(c) * 180) / M.PI;
  };
  // Signed turn of the view direction about the vertical, in degrees (-180..180).
  const yawOf = (pose) => M.atan2(-pose.r[2][0], -pose.r[2][2]);
  const yawDelta = (a, b) => {
    let d = yawOf(b) - yawOf(a);
    while (d > M.PI) d -= 2 * M.PI;
    while (d < -M.PI) d += 2 * M.PI;
    return (d * 180) / M.PI;
  };
  const dist = (a, b) => M.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
  const TRACE = 40;
  sc.center = [0, 0, 0];

  const onRender = (camera) => {
    if (!camera || !camera.matrixWorld) return;
    const n = (sc.cameraCounts.get(camera) || 0) + 1;
    sc.cameraCounts.set(camera, n);
    if (!sc.mainCamera || (camera !== sc.mainCamera && n > (sc.cameraCounts.get(sc.mainCamera) || 0))) sc.mainCamera = camera;
    if (camera !== sc.mainCamera) return;
    if (rec !== null) {
      // the view the camera claims for the frame being recorded, to be checked against its draws
      try { rec.view = copy16(camera.matrixWorldInverse.elements); rec.world = copy16(camera.matrixWorld.elements); }
      catch (e) { rec.view = null; rec.world = null; }
    }
    sc.posed += 1;
    const pose = poseOf(camera.matrixWorld);
    pose.lens = lensOf(camera);
    pose.t = clock();
    sc.lastPose = pose;
    const w = sc.win;
    if (!w) return;
    if (!w.ref) { w.ref = pose; w.scale = M.max(dist(pose.p, sc.center), 1e-6); return; }
    w.renders += 1;
    // Signed zoom and yaw, summed frame by frame: zoom is the move along the view axis (the mean
    // of the two frames' view directions, so circling a point the camera looks at adds nothing and
    // a dolly towards it counts whatever that point is), as a share of the camera's distance to the
    // world's centre at the window's start, plus the log change of fov/zoom; yaw is the turn of the
    // view direction about the vertical, never wrapped at 180 degrees.
    const q = w.prev || w.ref;
    const f = [0, 1, 2].map((i) => -(q.r[2][i] + pose.r[2][i]));
    const fn = M.hypot(f[0], f[1], f[2]) || 1;
    const along = ((pose.p[0] - q.p[0]) * f[0] + (pose.p[1] - q.p[1]) * f[1] + (pose.p[2] - q.p[2]) * f[2]) / fn;
    w.zoom += -along / w.scale + (q.lens > 0 && pose.lens > 0 ? M.log(pose.lens / q.lens) : 0);
    w.yaw += yawDelta(q, pose);
    w.prev = pose;
    // The first and the last few frames of the window (page time, zoom, yaw so far): the page's
    // own motion right after the window opened and right before it closed.
    const row = [pose.t / 1000, w.zoom, w.yaw];
    if (w.head.length < TRACE) w.head.push(row); else { w.tail.push(row); if (w.tail.length > TRACE) w.tail.shift(); }
    w.maxDeg = M.max(w.maxDeg, angleDeg(w.ref, pose));
    w.maxMove = M.max(w.maxMove, dist(w.ref.p, pose.p) / w.scale);
    // Zoom: change of the camera's distance to the world's centre (a tour orbiting it keeps that
    // distance, a wheel dolly changes it) plus the log change of fov/zoom.
    const radial = M.abs(dist(pose.p, sc.center) - dist(w.ref.p, sc.center)) / w.scale;
    const lens = w.ref.lens > 0 && pose.lens > 0 ? M.abs(M.log(pose.lens / w.ref.lens)) : 0;
    w.maxZoom = M.max(w.maxZoom, radial + lens);
  };

  const objectsOf = (scene) => {
    const out = [];
    scene.traverse((o) => out.push(o));
    return out;
  };

  // Hook window.scene (chaining any onBeforeRender it already had); returns what was found.
  sc.attach = () => {
    const s = window.scene;
    if (!s || typeof s.traverse !== 'function') return { scene: false };
    if (sc.hooked !== s) {
      const prev = s.onBeforeRender;
      s.onBeforeRender = function (renderer, scene, camera, ...rest) {
        try { onRender(camera); } catch (e) { /* never break the page */ }
        if (typeof prev === 'function') return prev.call(this, renderer, scene, camera, ...rest);
      };
      sc.hooked = s;
      // Scale for camera moves: the centre of the world-space box around the world's renderable
      // objects (their bounding boxes' corners; an InstancedMesh's box covers its instances).
      const box = [[Infinity, Infinity, Infinity], [-Infinity, -Infinity, -Infinity]];
      let n = 0;
      for (const o of objectsOf(s)) {
        if (!(o.isMesh || o.isPoints || o.isLine || o.isSprite) || !o.matrixWorld) continue;
        let bb = null;
        try {
          if (o.isInstancedMesh) { if (!o.boundingBox && o.computeBoundingBox) o.computeBoundingBox(); bb = o.boundingBox; }
          else if (o.geometry) { if (!o.geometry.boundingBox && o.geometry.computeBoundingBox) o.geometry.computeBoundingBox(); bb = o.geometry.boundingBox; }
        } catch (e) { bb = null; }
        const corners = bb && Number.isFinite(bb.min.x) && Number.isFinite(bb.max.x)
          ? [0, 1, 2, 3, 4, 5, 6, 7].map((k) => [(k & 1 ? bb.max : bb.min).x, (k & 2 ? bb.max : bb.min).y, (k & 4 ? bb.max : bb.min).z])
          : [[0, 0, 0]];
        const e = o.matrixWorld.elements;
        for (const c of corners) {
          for (let i = 0; i < 3; i++) {
            const w = e[i] * c[0] + e[4 + i] * c[1] + e[8 + i] * c[2] + e[12 + i];
            box[0][i] = M.min(box[0][i], w); box[1][i] = M.max(box[1][i], w);
          }
        }
        n++;
      }
      if (n) sc.center = [0, 1, 2].map((i) => (box[0][i] + box[1][i]) / 2);
    }
    return { scene: true };
  };

  // A measuring window: camera deviation from the pose on screen at its start, frames counted.
  sc.startWindow = () => {
    openPicture();
    sc.win = { ref: sc.lastPose, scale: sc.lastPose ? M.max(dist(sc.lastPose.p, sc.center), 1e-6) : 1, renders: 0, maxDeg: 0, maxMove: 0, maxZoom: 0, frames0: sc.frames, ticks0: sc.ticks, t0: clock(),
      prev: null, zoom: 0, yaw: 0, head: [], tail: [], input: null, inputAfter: 0, wheeled: 0, released: false, rested: false, view: newView(), drawn: [] };
    return true;
  };
  sc.readWindow = () => {
    const w = sc.win;
    if (!w) return null;
    return {
      camera: !!sc.mainCamera,
      renders: w.renders,
      max_degrees: w.maxDeg,
      max_move: w.maxMove,
      max_zoom: w.maxZoom,
      frames: sc.frames - w.frames0,
      ticks: sc.ticks - w.ticks0,
      // per frame the page drew in: [canvas id, vertices, ...] of what could be seen (noteFrame)
      drawn: copyOf(w.drawn),
      seconds: (clock() - w.t0) / 1000,
      // Signed change from the window's start to now: zoom (distance to the world's centre as a
      // share of it, plus the log change of fov/zoom; negative is closer) and the view's yaw.
      signed_zoom: w.zoom,
      signed_yaw: w.yaw,
      // The same from the last frame before the step's input was handled to the window's end:
      // the response to the input, without what the page did on its own before it came.
      input_zoom: w.input ? w.zoom - w.input[1] : null,
      input_yaw: w.input ? w.yaw - w.input[2] : null,
      input_t0: w.input ? w.input[0] : null,
      head: w.ref ? [[w.ref.t / 1000, 0, 0]].concat(w.head) : [],
      tail: w.tail.length ? w.tail.slice() : w.ref ? [[w.ref.t / 1000, 0, 0]].concat(w.head) : [],
      // Page times (s) of the two poses the signed figures compare: rates of the page's own
      // motion are taken over the frames actually rendered, not over our calls.
      pose_t0: w.ref ? w.ref.t / 1000 : null,
      pose_t1: w.ref && sc.lastPose ? sc.lastPose.t / 1000 : null,
      // What WebGL drew, window by window, as far as known now (every read carries it, so a page
      // that freezes or leaves keeps what was confirmed before).
      gl: glChanges(),
      // What WebGL drew with in the window (3.0): whether the view moved as the camera says.
      view: viewSummary(w),
    };
  };

  // Wait in the page, not by polling it (at 1 fps every call waits for a frame): resolves at the
  // first of our own frames (or timer) when the window has lasted minMs and shown minFrames
  // frames in which the page drew, or has lasted minMs without any drawn frame for at least quietMs
  // (a page that does not draw gets no extension; the checker makes it a few of the page's own frame
  // times, at least 1 s, so a page drawing under 1 fps is not taken for one that never draws), or
  // has lasted maxMs. With `next` the window
  // read is closed and the next one opened in the same moment, so control steps follow each
  // other without a gap and without an extra call.
  sc.waiters = [];
  sc.poll = () => {
    if (!sc.waiters.length) return;
    const keep = [];
    for (const wt of sc.waiters) { if (!wt()) keep.push(wt); }
    sc.waiters = keep;
  };
  // With `fromNow`, at least one of the frames must also be drawn wholly after this call (a
  // control step: after its input was handled).
  // `expect` names the step's last input event, which the check does not wait to be acknowledged:
  // {wheel: d} until trusted wheels summing |deltaY| >= d reached the page (coalesced wheels add
  // their deltas), {drag: true} until a move without buttons came after the release.
  const inputDone = (w, expect) => !expect || (expect.wheel ? w.wheeled >= expect.wheel * 0.99 : !expect.drag || w.rested);
  sc.waitFrames = (minFrames, minMs, maxMs, next, fromNow, expect, quietMs) => new Prom((resolve) => {
    const w = sc.win;
    if (!w) { resolve(null); return; }
    const after = sc.frames + (sc.cur.calls > 0 ? 1 : 0) + (fromNow ? 1 : 0);
    // maxMs counts from this call, not from the window's opening: the screenshot and the input
    // that came between (seconds each on a slow page) must not use up the step's own frames.
    const called = clock();
    const quiet = minMs > quietMs ? minMs : quietMs;
    let done = false;
    const check = () => {
      if (done) return true;
      const el = clock() - w.t0, f = sc.frames - w.frames0;
      // A step with an input also waits for the input to reach the page (the acknowledgement of
      // its dispatch can come frames before that) and for a frame drawn wholly after its last event.
      const enough = f >= minFrames && sc.frames >= after && (!fromNow || (w.input && inputDone(w, expect) && sc.frames >= w.inputAfter));
      if (!((el >= minMs && (enough || (f === 0 && el >= quiet))) || clock() - called >= maxMs)) return false;
      done = true;
      const out = sc.readWindow();
      if (next) { try { sc.attach(); } catch (e) { /* a broken scene only costs the camera */ } sc.startWindow(); }
      else openPicture();  // the last window's close: its change needs a picture after it
      resolve(out);
      return true;
    };
    if (check()) return;
    sc.waiters.push(check);
    const el = clock() - w.t0;
    for (const at of [minMs - el, quiet - el, maxMs]) if (at > 0) apply(setTimer, window, [() => { if (check()) sc.poll(); }, at + 1]);
  });

  // The moment an input reaches the page, before any of its own listeners: ours are the first on
  // window (added before any page script), so every frame drawn until then is the page's own
  // motion. A step's response is counted from the last frame before its first input.
  // Every later event of the step (the moves and release of a drag) moves on the frame the step
  // must wait for: one drawn wholly after the page handled it.
  // The event's fields are read through getters kept now: a page may redefine the prototypes' own.
  const getter = (proto, name) => Object.getOwnPropertyDescriptor(proto, name).get;
  const deltaY = getter(WheelEvent.prototype, 'deltaY'), deltaMode = getter(WheelEvent.prototype, 'deltaMode');
  const buttons = getter(MouseEvent.prototype, 'buttons');
  const seeInput = (type, start, e) => {
    const w = sc.win;
    if (!w) return;
    if (type === 'wheel') w.wheeled += apply(deltaMode, e, []) ? Infinity : M.abs(apply(deltaY, e, []));
    else if (type === 'pointerup' || type === 'mouseup') w.released = true;
    else if (type === 'pointermove' && w.released && !apply(buttons, e, [])) w.rested = true;
    if (start && !w.input) {
      const p = w.prev || w.ref;
      w.input = [p ? p.t / 1000 : clock() / 1000, w.zoom, w.yaw];
    }
    if (w.input) w.inputAfter = sc.frames + (sc.cur.calls > 0 ? 1 : 0) + 1;
  };
  const listen = window.addEventListener;
  for (const [type, start] of [['wheel', true], ['pointerdown', true], ['mousedown', true], ['pointermove', false], ['pointerup', false], ['mouseup', false]]) {
    apply(listen, window, [type, (e) => { if (e.isTrusted) seeInput(type, start, e); }, { capture: true, passive: true }]);
  }

  // --- the world: parts and triangles from the scene graph ---
  const isVisible = (o) => {
    for (let p = o; p; p = p.parent) if (p.visible === false) return false;
    return true;
  };
  sc.world = () => {
    const s = window.scene;
    const res = { scene: !!(s && typeof s.traverse === 'function'), parts: 0, triangles: 0, instanced_meshes: 0, meshes: 0,
      canvas: { draws_per_frame: sc.maxFrame.draws, parts_per_frame: sc.maxFrame.parts, triangles_per_frame: sc.maxFrame.triangles } };
    if (!res.scene) return res;
    for (const o of objectsOf(s)) {
      if (!(o.isMesh || o.isPoints || o.isLine || o.isSprite) || !isVisible(o)) continue;
      let inst = 1;
      if (o.isInstancedMesh) { inst = o.count; res.instanced_meshes += 1; }
      else if (o.isBatchedMesh) {
        // its instances: _instanceInfo in three.js 0.170, _drawInfo in earlier releases
        const info = o._instanceInfo || o._drawInfo;
        inst = Array.isArray(info) ? info.filter((d) => d && d.visible && d.active).length : 1;
      }
      else if (o.geometry && o.geometry.isInstancedBufferGeometry && Number.isFinite(o.geometry.instanceCount)) inst = o.geometry.instanceCount;
      res.parts += inst;
      if (o.isMesh) {
        res.meshes += 1;
        const g = o.geometry;
        if (g && g.attributes && g.attributes.position) {
          const n = g.index ? g.index.count : g.attributes.position.count;
          res.triangles += M.floor(n / 3) * inst;
        }
      }
    }
    return res;
  };

  // --- animation: snapshots of what can move, compared pairwise ---
  const isUnderCamera = (o) => {
    for (let p = o; p; p = p.parent) if (p.isCamera) return true;
    return false;
  };
  // 3.0: only what is drawn and in view can show motion: a renderable object (mesh, points, line,
  // sprite) visible up its parents, with a material that is shown, on a layer the camera sees, and
  // whose bounding sphere meets the camera's view. An empty node, a hidden mesh, or one far
  // outside the view moves nothing a person sees, nor do their materials' uniforms.
  const frustumOf = (cam) => {
    try {
      const pv = mul(copy16(cam.projectionMatrix.elements), copy16(cam.matrixWorldInverse.elements));
      const planes = [];
      for (let k = 0; k < 6; k++) {
        const i = k >> 1, sgn = k & 1 ? 1 : -1, p = new F64(4);
        for (let c = 0; c < 4; c++) p[c] = pv[c * 4 + 3] + sgn * pv[c * 4 + i];
        const n = M.hypot(p[0], p[1], p[2]);
        if (!(n > 0)) return null;
        for (let c = 0; c < 4; c++) p[c] /= n;
        put(planes, p);
      }
      return planes;
    } catch (e) { return null; }
  };
  const sphereOf = (o) => {
    let bs = null;
    try {
      // three.js culls a frustumCulled: false object never; an instanced mesh's sphere may be stale
      if (o.frustumCulled === false || o.isInstancedMesh || o.isBatchedMesh || o.isSkinnedMesh) return null;
      if (o.isSprite) bs = { center: { x: 0, y: 0, z: 0 }, radius: 0.75 };
      else if (o.geometry) { if (!o.geometry.boundingSphere && o.geometry.computeBoundingSphere) o.geometry.computeBoundingSphere(); bs = o.geometry.boundingSphere; }
      if (!bs || !bs.center || !(bs.radius >= 0)) return null;
      const e = o.matrixWorld.elements, c = bs.center;
      const s = M.max(M.hypot(e[0], e[1], e[2]), M.hypot(e[4], e[5], e[6]), M.hypot(e[8], e[9], e[10]));
      return [e[0] * c.x + e[4] * c.y + e[8] * c.z + e[12], e[1] * c.x + e[5] * c.y + e[9] * c.z + e[13],
        e[2] * c.x + e[6] * c.y + e[10] * c.z + e[14], bs.radius * s];
    } catch (e) { return null; }
  };
  const drawnInView = (o, planes, layers) => {
    if (!(o.isMesh || o.isPoints || o.isLine || o.isSprite) || !isVisible(o)) return false;
    const mats = Array.isArray(o.material) ? o.material : [o.material];
    let shown = false;
    for (let k = 0; k < mats.length; k++) { const m = mats[k]; if (m && m.visible !== false && !(m.transparent && m.opacity <= 0)) shown = true; }
    if (!shown) return false;
    if (layers !== null && o.layers && typeof o.layers.mask === 'number' && (o.layers.mask & layers) === 0) return false;
    if (planes !== null) {
      const sph = sphereOf(o);
      if (sph !== null) for (let k = 0; k < planes.length; k++) {
        const p = planes[k];
        if (p[0] * sph[0] + p[1] * sph[1] + p[2] * sph[2] + p[3] < -sph[3]) return false;
      }
    }
    return true;
  };
  sc.snapshot = () => {
    const s = window.scene;
    if (!s || typeof s.traverse !== 'function') return -1;
    const nodes = new Map(), inst = new Map(), attrs = new Map(), unif = new Map(), morph = new Map();
    const viewer = sc.mainCamera;
    const planes = viewer ? frustumOf(viewer) : null;
    const layers = viewer && viewer.layers && typeof viewer.layers.mask === 'number' ? viewer.layers.mask : null;
    for (const o of objectsOf(s)) {
      if (o.isCamera || isUnderCamera(o)) continue;
      if (!drawnInView(o, planes, layers)) continue;
      if (o.matrixWorld) nodes.set(o, Float64Array.from(o.matrixWorld.elements));
      if (o.isInstancedMesh && o.instanceMatrix) inst.set(o, o.instanceMatrix.array.slice(0, o.count * 16));
      const pos = o.geometry && o.geometry.attributes && o.geometry.attributes.position;
      if (pos) {
        // Vertex data is compared only when three.js was told it changed (its version counter).
        const entry = { version: pos.version, obj: o };
        if (o.isPoints && pos.array.length <= 600000) entry.copy = pos.array.slice();
        attrs.set(pos, entry);
      }
      if (o.morphTargetInfluences && o.morphTargetInfluences.length) morph.set(o, Float64Array.from(o.morphTargetInfluences));
      const mats = Array.isArray(o.material) ? o.material : o.material ? [o.material] : [];
      for (const m of mats) {
        if (!m || !m.uniforms || unif.has(m)) continue;
        const nums = [];
        for (const k of Object.keys(m.uniforms).sort()) {
          const v = m.uniforms[k] && m.uniforms[k].value;
          if (typeof v === 'number') nums.push(v);
          else if (v && typeof v === 'object' && !Array.isArray(v) && !v.isTexture) {
            for (const c of ['x', 'y', 'z', 'w', 'r', 'g', 'b']) if (typeof v[c] === 'number') nums.push(v[c]);
          }
        }
        if (nums.length) unif.set(m, nums);
      }
    }
    const cam = sc.mainCamera && sc.mainCamera.matrixWorld ? [sc.mainCamera.matrixWorld.elements[12], sc.mainCamera.matrixWorld.elements[13], sc.mainCamera.matrixWorld.elements[14]] : null;
    sc.snaps.push({ nodes, inst, attrs, unif, morph, cam, t: clock() });
    return sc.snaps.length - 1;
  };
  const changed = (a, b, tol) => {
    if (a.length !== b.length) return true;
    for (let i = 0; i < a.length; i++) if (M.abs(a[i] - b[i]) > tol * (1 + M.abs(a[i]))) return true;
    return false;
  };
  sc.compare = (i, j) => {
    const A = sc.snaps[i], B = sc.snaps[j];
    if (!A || !B) return null;
    const camD = A.cam && B.cam ? [B.cam[0] - A.cam[0], B.cam[1] - A.cam[1], B.cam[2] - A.cam[2]] : [0, 0, 0];
    const camMoved = M.hypot(...camD) > 1e-9;
    const res = { nodes: 0, followers_excluded: 0, instances: 0, particles: 0, geometries: 0, uniform_materials: 0, morph_meshes: 0, seconds: (B.t - A.t) / 1000 };
    for (const [o, m1] of B.nodes) {
      const m0 = A.nodes.get(o);
      if (!m0 || !changed(m0, m1, 1e-5)) continue;
      // Whatever moved by the same vector as the camera moves with it (sky domes, head lights).
      const d = [m1[12] - m0[12], m1[13] - m0[13], m1[14] - m0[14]];
      if (camMoved && M.hypot(d[0] - camD[0], d[1] - camD[1], d[2] - camD[2]) <= 1e-3 * M.hypot(...camD) + 1e-6) { res.followers_excluded++; continue; }
      res.nodes++;
    }
    for (const [o, a1] of B.inst) {
      const a0 = A.inst.get(o);
      if (!a0) continue;
      const n = M.min(a0.length, a1.length) / 16;
      for (let k = 0; k < n; k++) {
        for (let c = 0; c < 16; c++) {
          const x = a0[k * 16 + c], y = a1[k * 16 + c];
          if (M.abs(x - y) > 1e-5 * (1 + M.abs(x))) { res.instances++; break; }
        }
      }
    }
    for (const [attr, e1] of B.attrs) {
      const e0 = A.attrs.get(attr);
      if (!e0 || e0.version === e1.version) continue;
      if (e0.copy && e1.copy) {
        const n = M.min(e0.copy.length, e1.copy.length) / 3;
        let moved = 0;
        for (let k = 0; k < n; k++) {
          if (M.abs(e0.copy[3 * k] - e1.copy[3 * k]) + M.abs(e0.copy[3 * k + 1] - e1.copy[3 * k + 1]) + M.abs(e0.copy[3 * k + 2] - e1.copy[3 * k + 2]) > 1e-6) moved++;
        }
        res.particles += moved;
      } else {
        res.geometries++;
      }
    }
    for (const [m, u1] of B.unif) {
      const u0 = A.unif.get(m);
      if (u0 && changed(u0, u1, 1e-7)) res.uniform_materials++;
    }
    for (const [o, w1] of B.morph) {
      const w0 = A.morph.get(o);
      if (w0 && changed(w0, w1, 1e-6)) res.morph_meshes++;
    }
    return res;
  };

  const api = freeze({
    attach: () => sc.attach(),
    startWindow: () => sc.startWindow(),
    readWindow: () => sc.readWindow(),
    waitFrames: (minFrames, minMs, maxMs, next, fromNow, expect, quietMs) => sc.waitFrames(minFrames, minMs, maxMs, !!next, !!fromNow,
      expect && typeof expect === 'object' ? { wheel: +expect.wheel || 0, drag: !!expect.drag } : null, +quietMs > 1000 ? +quietMs : 1000),
    frames: () => ({ frames: sc.frames, ticks: sc.ticks, posed: sc.posed }),
    snapshot: () => sc.snapshot(),
    compare: (i, j) => sc.compare(i, j),
    world: () => sc.world(),
    contexts: () => ({ webgl: sc.webglContexts, c2d: sc.canvas2dContexts }),
    gl: () => glChanges(),
    glSettled: (maxMs) => glSettled(+maxMs || 0),
    pictured: (maxMs) => pictured(+maxMs || 0),
  });
  apply(debug, con, [TOKEN, api]);
})();
