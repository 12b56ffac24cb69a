// The ready signal of the browser check (rubric in checks/rubric.toml), injected before any page
// script runs, in the full check and in the quick load check alike. window.ready becomes a setter:
// the moment it turns true (page time since navigation start) goes to the checker at once through
// its binding, so a page that freezes or navigates away right after is still seen ready. A page
// that redefines window.ready itself is still found by the checker reading it.
(() => {
  if (window.top !== window || window.__scReadyHooked) return;
  window.__scReadyHooked = true;
  let readyValue;
  let readyAt;
  try {
    Object.defineProperty(window, 'ready', {
      configurable: true, enumerable: true,
      get() { return readyValue; },
      set(v) {
        readyValue = v;
        if (v === true && readyAt === undefined) {
          readyAt = performance.now();
          try { if (typeof window.__scReady === 'function') window.__scReady(readyAt); } catch (e) { /* checker gone */ }
        }
      },
    });
  } catch (e) { /* window.ready not configurable: the checker's reading alone */ }
})();
