// Draw-a-digit page — running train steps without freezing the page (seed 000 §5): a few steps per animation
// frame (as many as fit in a small time budget, at least one), a progress callback after each frame, a pause
// while the tab is hidden (said on the page), and a stop on request. The batches come from a callback.

const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));

function whenVisible() {
  return new Promise((resolve) => {
    const on = () => {
      if (document.visibilityState === 'visible') {
        document.removeEventListener('visibilitychange', on);
        resolve();
      }
    };
    document.addEventListener('visibilitychange', on);
  });
}

/**
 * Runs `total` steps of `program` on `getRuntime()` (looked up every step: a runtime replaced after a lost context
 * is picked up), `batch(i)` giving the feeds of step i. Calls onStep(i, outputs) after every step and
 * onFrame(done, total) after every frame; onPause(true/false) when the tab hides and shows again.
 * `debugEvery`: every n-th step runs `debugProgram` instead (the same update, more outputs) and reports it.
 * Resolves to the number of steps done (fewer than total when `signal.stopped` was set).
 */
export async function runSteps({ getRuntime, program, total, batch, onStep, onFrame, onPause, budgetMs = 12,
                                 signal = {}, debugEvery = 0, debugProgram = null }) {
  let done = 0;
  while (done < total && !signal.stopped) {
    if (document.visibilityState === 'hidden') {
      onPause?.(true);
      await whenVisible();
      onPause?.(false);
    }
    await nextFrame();
    const t0 = performance.now();
    do {
      const debug = debugEvery > 0 && debugProgram && (done + 1) % debugEvery === 0;
      const out = await getRuntime().run(debug ? debugProgram : program, batch(done));
      onStep?.(done, out, debug);
      ++done;
    } while (done < total && !signal.stopped && document.visibilityState !== 'hidden' &&
             performance.now() - t0 < budgetMs);
    onFrame?.(done, total);
  }
  return done;
}
