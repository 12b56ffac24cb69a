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
    for (const proto of glProtos) {
      const getError = proto.getError, canvas = canvasOf(proto);
      proto.getError = function getError_() {
        const c = apply(canvas, this, []);
        const owner = c ? ownerDoc(c) : null;
        if (owner && owner !== doc) throw new TypeError('Illegal invocation');
        return apply(getError, this, []);
      };
    }
    return;
  }
  const TOKEN = '%TOKEN%';
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
    cur: { draws: 0, parts: 0, triangles: 0, refused: false },
    maxFrame: { draws: 0, parts: 0, triangles: 0 },
    cameraCounts: new Map(), // camera -> renders of window.scene with it
    mainCamera: null,
    posed: 0,             // renders of the main camera seen since window.scene was hooked
    lastPose: null,
    win: null,
    hooked: null,
    snaps: [],
  };

  // --- frames: our own animation loop; a frame counts when the page drew in it ---
  const tick = () => {
    sc.ticks += 1;
    const c = sc.cur;
    const drawn = drawnTo;
    drawnTo = [];
    if (c.draws > 0) {
      sc.frames += 1;
      const m = sc.maxFrame;
      // Only a frame that would raise the world's figures is asked whether WebGL refused any of
      // its draws: a getError per frame waits for the GPU process and slowed a 1.4 fps page to 1.1.
      if ((c.draws > m.draws || c.parts > m.parts || c.triangles > m.triangles) && !refused(c, drawn)) {
        if (c.draws > m.draws) m.draws = c.draws;
        if (c.parts > m.parts) m.parts = c.parts;
        if (c.triangles > m.triangles) m.triangles = c.triangles;
        // Pushed to the checker as they grow, so a page that freezes or leaves keeps them.
        apply(debug, con, [TOKEN, 'max', m.draws, m.parts, m.triangles]);
      }
    }
    sc.cur = { draws: 0, parts: 0, triangles: 0, refused: false };
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
  HTMLCanvasElement.prototype.getContext = function getContext(...args) {
    const ctx = apply(getContextOrig, this, args);
    if (ctx && !apply(wsHas, counted, [this])) {
      const type = '' + args[0];
      if (apply(reTest, webglRe, [type])) { sc.webglContexts += 1; apply(wsAdd, counted, [this]); }
      else if (type === '2d') { sc.canvas2dContexts += 1; apply(wsAdd, counted, [this]); }
    }
    return ctx;
  };

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
  const wrapDraw = (proto, name, countArg, instArg, getError) => {
    const orig = proto && proto[name];
    if (typeof orig !== 'function') return;
    const canvas = Object.getOwnPropertyDescriptor(proto, 'canvas').get;
    proto[name] = function (...args) {
      // The native call first: one on anything but a real context throws and counts nothing.
      const out = apply(orig, this, args);
      if (armed !== null) {
        // A window's opening picture: what WebGL drew in this frame, once the page's callback is over.
        const pic = armed;
        armed = null;
        pic.taken = true;
        pic.pending += 1;  // until takePicture has started its pictures: none is read half-taken
        apply(microtask, window, [() => takePicture(pic)]);
      }
      const inst = instArg === null ? 1 : (args[instArg] | 0) > 0 ? args[instArg] | 0 : 0;
      const c = sc.cur;
      c.draws += 1;
      c.parts += inst;
      c.triangles += trianglesOf(args[0], args[countArg] | 0) * inst;
      let seen = false;
      for (let i = 0; i < drawnTo.length; i++) if (drawnTo[i].ctx === this) seen = true;
      if (!seen) defineOwn(drawnTo, drawnTo.length, { value: { ctx: this, getError, canvas }, writable: true, enumerable: true, configurable: true });
      return out;
    };
  };
  const wrapGetError = (proto, getError) => {
    proto.getError = function getError_() {
      const e = apply(wmGet, held, [this]);
      if (e !== undefined) { apply(wmDelete, held, [this]); return e; }
      const now_ = apply(getError, this, []);
      if (now_ !== NO_ERROR) sc.cur.refused = true;
      return now_;
    };
  };
  for (const proto of glProtos) {
    const getError = proto.getError;
    wrapGetError(proto, getError);
    wrapDraw(proto, 'drawArrays', 2, null, getError);
    wrapDraw(proto, 'drawElements', 1, null, getError);
    wrapDraw(proto, 'drawArraysInstanced', 2, 3, getError);
    wrapDraw(proto, 'drawElementsInstanced', 1, 4, getError);
  }

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
  const pictures = [];  // one per window opened, in order: {taken, pending, list: [{canvas, rect, data}], shares}
  let armed = null;     // the picture waiting for the page's next drawn frame
  const openPicture = () => {
    const pic = { taken: false, pending: 0, list: [], shares: null };
    defineOwn(pictures, pictures.length, { value: pic, writable: true, enumerable: true, configurable: true });
    armed = canPicture ? pic : null;
  };
  const ended = (pic) => { pic.pending -= 1; if (pic.pending === 0) sc.poll(); };
  const takePicture = (pic) => {
    try { takeEach(pic); } finally { ended(pic); }  // ended: the hold taken with the frame
  };
  const takeEach = (pic) => {
    for (let i = 0; i < drawnTo.length; i++) {
      const canvas = apply(drawnTo[i].canvas, drawnTo[i].ctx, []);
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
        let data;
        try { data = new U8(apply(vfSize, frame, [])); } catch (e) { apply(vfClose, frame, []); ended(pic); return; }
        const done = (ok) => {
          try { apply(vfClose, frame, []); } catch (e) { /* closed already */ }
          if (ok && apply(byteLength, data, []) === PIC_BYTES) defineOwn(pic.list, pic.list.length, { value: { canvas, rect, data }, writable: true, enumerable: true, configurable: true });
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
  const glChanges = () => {
    const out = [];
    for (let i = 0; i + 1 < pictures.length; i++) defineOwn(out, i, { value: sharesOf(i), writable: true, enumerable: true, configurable: true });
    return { available: canPicture, windows: out };
  };
  // Resolves once the last picture was taken and none is still being taken, or after maxMs.
  const glSettled = (maxMs) => new Prom((resolve) => {
    const t0 = clock();
    const check = () => {
      let busy = pictures.length > 0 && canPicture && !pictures[pictures.length - 1].taken;
      for (let i = 0; i < pictures.length; i++) if (pictures[i].pending > 0) busy = true;
      if (busy && clock() - t0 < maxMs) return false;
      resolve({ gl: glChanges() });
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
      prev: null, zoom: 0, yaw: 0, head: [], tail: [], input: null, inputAfter: 0, wheeled: 0, released: false, rested: false };
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
    };
  };

  // Wait in the page, not by polling it (at 1 fps every call waits for a frame): resolves at the
  // first of our own frames (or timer) when the window has lasted minMs and shown minFrames
  // frames in which the page drew, or has lasted minMs without any drawn frame for at least 1 s
  // (a page that does not draw gets no extension), or has lasted maxMs. With `next` the window
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
  sc.waitFrames = (minFrames, minMs, maxMs, next, fromNow, expect) => new Prom((resolve) => {
    const w = sc.win;
    if (!w) { resolve(null); return; }
    const after = sc.frames + (sc.cur.draws > 0 ? 1 : 0) + (fromNow ? 1 : 0);
    // maxMs counts from this call, not from the window's opening: the screenshot and the input
    // that came between (seconds each on a slow page) must not use up the step's own frames.
    const called = clock();
    let done = false;
    const check = () => {
      if (done) return true;
      const el = clock() - w.t0, f = sc.frames - w.frames0;
      // A step with an input also waits for the input to reach the page (the acknowledgement of
      // its dispatch can come frames before that) and for a frame drawn wholly after its last event.
      const enough = f >= minFrames && sc.frames >= after && (!fromNow || (w.input && inputDone(w, expect) && sc.frames >= w.inputAfter));
      if (!((el >= minMs && (enough || (f === 0 && el >= (minMs > 1000 ? minMs : 1000)))) || clock() - called >= maxMs)) return false;
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
    for (const at of [minMs - el, (minMs > 1000 ? minMs : 1000) - el, maxMs]) if (at > 0) apply(setTimer, window, [() => { if (check()) sc.poll(); }, at + 1]);
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
    if (w.input) w.inputAfter = sc.frames + (sc.cur.draws > 0 ? 1 : 0) + 1;
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
      else if (o.isBatchedMesh) inst = o._drawInfo ? o._drawInfo.filter((d) => d.visible && d.active).length : 1;
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
  sc.snapshot = () => {
    const s = window.scene;
    if (!s || typeof s.traverse !== 'function') return -1;
    const nodes = new Map(), inst = new Map(), attrs = new Map(), unif = new Map(), morph = new Map();
    for (const o of objectsOf(s)) {
      if (o.isCamera || isUnderCamera(o)) continue;
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

  // --- the visible text, for the English item ---
  sc.text = () => {
    const parts = [];
    if (document.title) parts.push(document.title);
    if (document.body) parts.push(document.body.innerText || '');
    return parts.join('\n').replace(/[ \t]+/g, ' ').trim();
  };
  // Boxes of the page's visible text (viewport pixels), so "not blank" and "the picture changed"
  // can leave the page's own text out. A page that lies here only hides more of its own picture.
  sc.textBoxes = () => {
    const out = [];
    if (!document.body) return out;
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    for (let n = walker.nextNode(); n && out.length < 2000; n = walker.nextNode()) {
      if (!n.textContent || !n.textContent.trim()) continue;
      range.selectNodeContents(n);
      for (const r of range.getClientRects()) {
        if (r.width > 0 && r.height > 0) out.push([M.floor(r.left) - 2, M.floor(r.top) - 2, M.ceil(r.right) + 2, M.ceil(r.bottom) + 2]);
      }
    }
    return out;
  };

  const api = freeze({
    attach: () => sc.attach(),
    startWindow: () => sc.startWindow(),
    readWindow: () => sc.readWindow(),
    waitFrames: (minFrames, minMs, maxMs, next, fromNow, expect) => sc.waitFrames(minFrames, minMs, maxMs, !!next, !!fromNow,
      expect && typeof expect === 'object' ? { wheel: +expect.wheel || 0, drag: !!expect.drag } : null),
    frames: () => ({ frames: sc.frames, ticks: sc.ticks, posed: sc.posed }),
    snapshot: () => sc.snapshot(),
    compare: (i, j) => sc.compare(i, j),
    world: () => sc.world(),
    text: () => sc.text(),
    textBoxes: () => sc.textBoxes(),
    contexts: () => ({ webgl: sc.webglContexts, c2d: sc.canvas2dContexts }),
    gl: () => glChanges(),
    glSettled: (maxMs) => glSettled(+maxMs || 0),
  });
  apply(debug, con, [TOKEN, api]);
})();
