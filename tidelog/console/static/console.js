// tidelog console: write forms through /api/ (with the CSRF token) and the live charts (uPlot, shipped here).
"use strict";
const tidelog = (() => {
  const token = () => document.querySelector('meta[name="csrf-token"]').content;
  const say = (text, ok) => {
    const el = document.getElementById("result");
    el.textContent = text;
    el.className = ok ? "ok" : "error";
  };
  async function send(method, action, body) {
    const response = await fetch(action, {
      method, headers: {"Content-Type": "application/json", "X-CSRF-Token": token()},
      body: body === undefined ? undefined : JSON.stringify(body)});
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(answer.error || response.statusText);
    return answer;
  }
  function done(el, answer, fields) {
    const next = el.dataset.next;
    if (next) {
      location.href = next.replace(/\{(\w+)\}/g, (_, k) => encodeURIComponent(fields[k] || ""));
    } else {
      say("Done: " + JSON.stringify(answer), true);
      if (el.tagName === "FORM" && el.id !== "produce") setTimeout(() => location.reload(), 0);
    }
  }
  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!form.classList.contains("api")) return;
    event.preventDefault();
    const fields = Object.fromEntries(new FormData(form).entries());
    try {
      done(form, await send(form.dataset.method, form.dataset.action, fields), fields);
    } catch (e) { say(e.message, false); }
  });
  document.addEventListener("click", async (event) => {
    const button = event.target;
    if (button.tagName !== "BUTTON" || !button.classList.contains("api")) return;
    if (button.dataset.confirm && !confirm(button.dataset.confirm)) return;
    try { done(button, await send(button.dataset.method, button.dataset.action), {}); }
    catch (e) { say(e.message, false); }
  });

  const POINTS = 120;
  const palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
  function chart(el, title, names) {
    const series = [{}].concat(names.map((n, i) => ({label: n, stroke: palette[i % palette.length]})));
    // a fixed window of the last POINTS seconds, so the first points do not stretch the axis over years
    const scales = {x: {time: true, range: (u, min, max) => [max - POINTS, max]}};
    return new uPlot({title, width: Math.max(300, el.clientWidth || 480), height: 220, series, scales},
                     [[]].concat(names.map(() => [])), el);
  }
  // The overview: rates from /api/traffic's cumulative counters, one point a second.
  function trafficCharts(bytesId, requestsId) {
    const bytes = chart(document.getElementById(bytesId), "Bytes/s", ["in", "out"]);
    let requests = null, apis = [], last = null;
    const data = {t: [], in: [], out: [], api: {}};
    async function tick() {
      const now = await (await fetch("/api/traffic")).json();
      if (last) {
        const dt = Math.max(0.001, (now.time_ms - last.time_ms) / 1000);
        data.t.push(now.time_ms / 1000);
        data.in.push((now.bytes_in - last.bytes_in) / dt);
        data.out.push((now.bytes_out - last.bytes_out) / dt);
        const names = Object.keys(now.requests).sort();
        for (const n of names) {
          if (!data.api[n]) data.api[n] = data.t.slice(0, -1).map(() => 0);
          data.api[n].push(((now.requests[n] || 0) - (last.requests[n] || 0)) / dt);
        }
        for (const n of Object.keys(data.api)) if (data.api[n].length < data.t.length) data.api[n].push(0);
        if (data.t.length > POINTS) {
          data.t.shift(); data.in.shift(); data.out.shift();
          for (const n of Object.keys(data.api)) data.api[n].shift();
        }
        bytes.setData([data.t, data.in, data.out]);
        const keys = Object.keys(data.api).sort();
        if (!requests || keys.join() !== apis.join()) {
          const el = document.getElementById(requestsId);
          if (requests) requests.destroy();
          apis = keys;
          requests = chart(el, "Requests/s by API", apis);
        }
        requests.setData([data.t].concat(apis.map((n) => data.api[n])));
      }
      last = now;
    }
    tick(); setInterval(tick, 1000);
  }
  // Compaction: each partition's dirty ratio from /api/cleaner, sampled every 2 s while the page is open.
  function dirtyChart(id) {
    const el = document.getElementById(id);
    let plot = null, names = [];
    const data = {t: [], tp: {}};
    async function tick() {
      const rows = await (await fetch("/api/cleaner")).json();
      data.t.push(Date.now() / 1000);
      for (const r of rows.filter((r) => !r.topic.startsWith("__"))) {  // internal topics: the table only
        const n = r.topic + "-" + r.partition;
        if (!data.tp[n]) data.tp[n] = data.t.slice(0, -1).map(() => null);
        data.tp[n].push(r.dirty_ratio);
      }
      for (const n of Object.keys(data.tp)) if (data.tp[n].length < data.t.length) data.tp[n].push(null);
      if (data.t.length > POINTS) { data.t.shift(); for (const n of Object.keys(data.tp)) data.tp[n].shift(); }
      const keys = Object.keys(data.tp).sort();
      if (!plot || keys.join() !== names.join()) {
        if (plot) plot.destroy();
        names = keys;
        plot = chart(el, "Dirty ratio", names);
      }
      plot.setData([data.t].concat(names.map((n) => data.tp[n])));
    }
    tick(); setInterval(tick, 2000);
  }
  return {send, trafficCharts, dirtyChart};
})();
