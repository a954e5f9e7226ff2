// Loads a Chrome JSON trace into the trace engine of the Chrome DevTools Performance panel (the
// devtools frontend bundled with Chromium: devtools://devtools/bundled/trace_app.html), in
// headless Chromium driven over the DevTools protocol, and prints one JSON line with what that
// importer built: processes, threads with their entry counts and call-tree roots, warnings.
// A second, real trace reader for the e2e test (e2e_capture.py export_trace); nothing is fetched
// from the network.
// Usage: node --experimental-websocket devtools_trace_check.js TRACE.json   (CHROMIUM=path, PROFILE_DIR=dir)
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const text = fs.readFileSync(process.argv[2], 'utf8');
// PROFILE_DIR (the e2e test's work directory) is kept; a temporary one is removed at the end.
const keepProfile = Boolean(process.env.PROFILE_DIR);
const profile = keepProfile ? process.env.PROFILE_DIR : fs.mkdtempSync(path.join(os.tmpdir(), 'commprof-devtools-'));
const chrome = spawn(process.env.CHROMIUM || 'chromium', [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  `--user-data-dir=${profile}`, '--remote-debugging-port=0', 'about:blank']);

let finished = false;
function finish(line, code) {
  if (finished) return;
  finished = true;
  console.log(line);
  // Remove the profile once Chromium has exited (it writes to it until then).
  chrome.once('exit', () => {
    try {
      if (!keepProfile) fs.rmSync(profile, { recursive: true, force: true, maxRetries: 5 });
    } catch (e) {
      // a leftover temp directory is not worth failing the check for
    }
    process.exit(code);
  });
  chrome.kill();
}

// Runs inside trace_app.html: parse the text with the page's JSON.parse, then the trace engine.
const inPage = `(async (text) => {
  const T = await import('./models/trace/trace.js');
  const json = JSON.parse(text);
  const model = T.TraceModel.Model.createWithAllHandlers();
  await model.parse(json.traceEvents, {metadata: {}, isFreshRecording: false});
  const parsed = model.parsedTrace(0);
  const data = parsed.data || parsed;
  const out = {processes: [], warnings: []};
  for (const [pid, proc] of data.Renderer.processes) {
    const threads = [];
    for (const [tid, th] of proc.threads) {
      threads.push({tid, name: th.name, entries: th.entries.length, roots: th.tree ? th.tree.roots.size : -1});
    }
    out.processes.push({pid, threads});
  }
  if (data.Warnings && data.Warnings.perWarning) out.warnings = Array.from(data.Warnings.perWarning.keys());
  return JSON.stringify(out);
})`;

let stderr = '';
let started = false;
chrome.stderr.on('data', (d) => {
  stderr += d.toString();
  const m = stderr.match(/DevTools listening on (ws:\/\/\S+)/);
  if (m && !started) {
    started = true;
    drive(m[1]);
  }
});

function drive(url) {
  const ws = new WebSocket(url);
  let next = 0;
  const pending = new Map();
  const send = (method, params, sessionId) => new Promise((resolve) => {
    const id = ++next;
    pending.set(id, resolve);
    ws.send(JSON.stringify({ id, method, params: params || {}, sessionId }));
  });
  ws.onmessage = (ev) => {
    const m = JSON.parse(ev.data);
    if (m.id && pending.has(m.id)) pending.get(m.id)(m);
  };
  ws.onopen = async () => {
    const target = await send('Target.createTarget', { url: 'devtools://devtools/bundled/trace_app.html' });
    const attached = await send('Target.attachToTarget', { targetId: target.result.targetId, flatten: true });
    const session = attached.result.sessionId;
    // The app's modules load asynchronously; wait until the trace module can be imported.
    for (let i = 0; i < 50; ++i) {
      const ready = await send('Runtime.evaluate', {
        expression: "import('./models/trace/trace.js').then(() => true, () => false)", awaitPromise: true,
        returnByValue: true }, session);
      if (ready.result && ready.result.result && ready.result.result.value === true) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const r = await send('Runtime.evaluate', {
      expression: `${inPage}(${JSON.stringify(text)})`, awaitPromise: true, returnByValue: true }, session);
    if (!r.result || r.result.exceptionDetails) {
      finish('ERROR ' + JSON.stringify(r.result ? r.result.exceptionDetails : r), 1);
      return;
    }
    finish(r.result.result.value, 0);
  };
}

setTimeout(() => finish('ERROR timeout; chromium said: ' + stderr.slice(-2000), 1), 150000);
