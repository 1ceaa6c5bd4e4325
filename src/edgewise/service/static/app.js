// The edgewise manager's dashboard: plain JavaScript, no build step. It polls the API every
// two seconds with the token kept in this tab's session storage (never in a URL).
"use strict";
(() => {
  const KEY = "edgewise-token";
  const POLL_MS = 2000;
  const JOBS_SHOWN = 50;  // the jobs table shows the newest 50: it asks for no more
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  let timer = null;
  let cluster = null;
  let charts = {};
  let jobState = { id: null, lastEvent: 0, planShown: false };

  function el(tag, text, attrs) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function detail(data) {
    if (data && typeof data.detail === "string") return data.detail;
    if (data && Array.isArray(data.detail)) return data.detail.map((d) => d.msg).join("; ");
    return "";
  }

  async function api(path, options) {
    const token = sessionStorage.getItem(KEY) || "";
    const opts = Object.assign({ cache: "no-store" }, options || {});
    opts.headers = { Authorization: "Bearer " + token };
    if (opts.body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(opts.body);
    }
    const response = await fetch(path, opts);
    if (response.status === 401) {
      logout("the manager refused the token");
      throw new Error("401");
    }
    const type = response.headers.get("content-type") || "";
    const data = type.includes("json") ? await response.json() : await response.text();
    if (!response.ok) throw new Error(detail(data) || "HTTP " + response.status);
    return data;
  }

  function status(text, isError) {
    $("status").textContent = text;
    $("status").className = isError ? "error" : "";
  }

  function show(view) {
    for (const id of ["login", "view-cluster", "view-jobs", "view-job"]) $(id).hidden = id !== view;
    $("nav").hidden = view === "login";
  }

  function logout(reason) {
    sessionStorage.removeItem(KEY);
    clearInterval(timer);
    show("login");
    $("login-error").textContent = reason || "";
  }

  function fmt(value) {
    if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toFixed(3);
    return value === null || value === undefined ? "—" : String(value);
  }

  // ---- cluster view -------------------------------------------------------------------
  function drawMap(summary, metrics, strikes) {
    const map = $("map");
    map.replaceChildren();
    const devices = summary.devices;
    const pos = {};
    devices.forEach((d, i) => {
      const angle = (2 * Math.PI * i) / devices.length - Math.PI / 2;
      pos[d.name] = [300 + 160 * Math.cos(angle), 210 + 160 * Math.sin(angle)];
    });
    const explicit = new Set(summary.links.map((l) => [l.a, l.b].sort().join("|")));
    for (let i = 0; i < devices.length; i++) {
      for (let j = i + 1; j < devices.length; j++) {
        const [a, b] = [devices[i].name, devices[j].name];
        const [x1, y1] = pos[a];
        const [x2, y2] = pos[b];
        const isExplicit = explicit.has([a, b].sort().join("|"));
        map.append(svg("line", { x1, y1, x2, y2, stroke: isExplicit ? "#1d3557" : "#d5d9de",
                                 "stroke-width": isExplicit ? 2.5 : 1 }));
      }
    }
    for (const l of summary.links) {
      const [x1, y1] = pos[l.a] || [0, 0];
      const [x2, y2] = pos[l.b] || [0, 0];
      map.append(svg("text", { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 3, fill: "#1d3557" },
                     l.bandwidth_mbps + " Mb/s"));
    }
    for (const d of devices) {
      const [x, y] = pos[d.name];
      const cpu = (metrics[d.name] || {}).cpu_percent;
      const struck = (strikes.strikes[d.name] || 0) >= strikes.limit;
      const fill = struck ? "#ef476f" : cpu === undefined ? "#adb5bd" : cpu > 80 ? "#ffd166" : "#8ac926";
      const group = svg("g", { class: "device", "data-device": d.name });
      group.append(svg("circle", { cx: x, cy: y, r: 24, fill, stroke: "#1d232a" }));
      group.append(svg("text", { x, y: y + 38, "text-anchor": "middle" }, d.name));
      group.append(svg("text", { x, y: y + 4, "text-anchor": "middle" },
                       cpu === undefined ? "—" : Math.round(cpu) + "%"));
      map.append(group);
    }
    map.append(svg("text", { x: 8, y: 414, fill: "#555" }, "default link " +
      summary.default_link.bandwidth_mbps + " Mb/s, " + summary.default_link.latency_ms + " ms"));
  }

  function deviceRows(summary, metrics, strikes) {
    const body = $("devices").tBodies[0];
    body.replaceChildren();
    for (const d of summary.devices) {
      const m = metrics[d.name] || {};
      const count = strikes.strikes[d.name] || 0;
      const row = el("tr", null, { id: "device-" + d.name });
      const cells = [d.name, d.type, d.roles.join(", "), fmt(m.cpu_percent), fmt(m.memory_percent),
        fmt(m.accelerator_percent), fmt(m.age_seconds), count + " / " + strikes.limit];
      cells.forEach((c, i) => {
        const cell = el("td", c);
        if (i === 7 && count >= strikes.limit) cell.className = "struck";
        row.append(cell);
      });
      body.append(row);
    }
  }

  function fillFaultForm(summary) {
    for (const id of ["fault-device", "fault-peer"]) {
      const select = $(id);
      const keep = id === "fault-peer" ? [el("option", "—", { value: "" })] : [];
      select.replaceChildren(...keep, ...summary.devices.map((d) => el("option", d.name, { value: d.name })));
    }
  }

  async function renderCluster() {
    if (!cluster) {
      cluster = await api("/api/v1/cluster");
      $("cluster-name").textContent = "Cluster " + cluster.name;
      fillFaultForm(cluster);
    }
    const [metrics, strikes, events] = await Promise.all([
      api("/api/v1/devices/metrics"), api("/api/v1/strikes"), api("/api/v1/events?limit=200")]);
    drawMap(cluster, metrics, strikes);
    deviceRows(cluster, metrics, strikes);
    const list = $("cluster-events");
    list.replaceChildren(...events.slice(-50).reverse().map((e) =>
      el("li", new Date(e.at * 1000).toLocaleTimeString() + "  " + e.kind + ": " + e.message)));
  }

  // ---- jobs view ----------------------------------------------------------------------
  function figures(job) {
    return Object.entries(job.summary).slice(0, 4).map(([k, v]) => k + " " + fmt(v)).join(", ");
  }

  async function renderExamples() {
    const box = $("examples");
    if (box.childElementCount) return;
    const examples = await api("/api/v1/jobs/examples");
    for (const ex of examples) {
      const button = el("button", "Start " + ex.kind + " example",
                        { type: "button", id: "start-" + ex.kind, title: ex.description });
      button.addEventListener("click", async () => {
        try {
          const job = await api("/api/v1/jobs", { method: "POST", body: { kind: ex.kind, spec: ex.spec } });
          location.hash = "#/jobs/" + job.id;
        } catch (err) { status(err.message, true); }
      });
      box.append(button);
    }
  }

  async function renderJobs() {
    await renderExamples();
    const page = await api("/api/v1/jobs?limit=" + JOBS_SHOWN);
    $("jobs-more").hidden = !page.has_more;
    const body = $("jobs").tBodies[0];
    body.replaceChildren();
    for (const job of page.jobs) {
      const row = el("tr", null, { id: "job-" + job.id });
      const link = el("a", job.id, { href: "#/jobs/" + job.id });
      const first = el("td");
      first.append(link);
      const state = el("td");
      state.append(el("span", job.state, { class: "state state-" + job.state }));
      const bar = el("td");
      bar.append(el("progress", null, { max: "1", value: String(job.progress) }));
      row.append(first, el("td", job.kind), state, bar, el("td", figures(job)),
                 el("td", new Date(job.created_at * 1000).toLocaleString()));
      body.append(row);
    }
  }

  // ---- one job ------------------------------------------------------------------------
  function planTables(plan) {
    const box = $("job-plan");
    box.replaceChildren();
    for (const t of plan.tables || []) {
      box.append(el("h4", t.title));
      const table = el("table", null, { class: "plan" });
      const head = el("tr");
      t.columns.forEach((c) => head.append(el("th", c)));
      table.append(head);
      for (const r of t.rows) {
        const row = el("tr");
        r.forEach((c) => row.append(el("td", fmt(c))));
        table.append(row);
      }
      box.append(table);
    }
    const rest = Object.assign({}, plan);
    delete rest.tables;
    const raw = el("details");
    raw.append(el("summary", "the plan as JSON"), el("pre", JSON.stringify(rest, null, 1)));
    box.append(raw);
  }

  function drawCharts(history) {
    const box = $("job-charts");
    const names = Object.keys(history).filter((n) => n !== "epoch")  // epochs are the x axis
      .sort((a, b) => (b.includes("accuracy") - a.includes("accuracy")) || a.localeCompare(b));
    for (const name of names) {
      const rows = history[name];
      const useStep = rows.every((r) => r[1] !== null);
      const xs = rows.map((r) => (useStep ? r[1] : r[0]));
      const ys = rows.map((r) => r[2]);
      if (!charts[name]) {
        const holder = el("div", null, { class: "chart", id: "chart-" + name });
        box.append(holder);
        charts[name] = new uPlot({
          title: name, width: 400, height: 220,
          scales: { x: { time: !useStep } },
          series: [{ label: useStep ? "step" : "time" }, { label: name, stroke: "#1d3557", width: 2,
                                                              points: { show: true } }],
        }, [xs, ys], holder);
      } else {
        charts[name].setData([xs, ys]);
      }
    }
    accuracyOverDeviceTime(box, history);
  }

  // An update job's accuracy curve: validation accuracy at each epoch's end over the device
  // seconds spent until then (time to accuracy; metrics val_accuracy, device_seconds_elapsed).
  function accuracyOverDeviceTime(box, history) {
    const acc = history.val_accuracy, spent = history.device_seconds_elapsed;
    if (!acc || !spent) return;
    const at = new Map(spent.map((r) => [r[1], r[2]]));
    const rows = acc.filter((r) => at.has(r[1]));
    const xs = rows.map((r) => at.get(r[1])), ys = rows.map((r) => r[2]);
    const name = "accuracy over device seconds";
    if (!charts[name]) {
      const holder = el("div", null, { class: "chart", id: "chart-accuracy-device-time" });
      box.prepend(holder);
      charts[name] = new uPlot({
        title: name, width: 400, height: 220, scales: { x: { time: false } },
        series: [{ label: "device s" }, { label: "val_accuracy", stroke: "#e63946", width: 2,
                                          points: { show: true } }],
      }, [xs, ys], holder);
    } else {
      charts[name].setData([xs, ys]);
    }
  }

  async function renderJob(id) {
    if (jobState.id !== id) {
      jobState = { id, lastEvent: 0, planShown: false };
      Object.values(charts).forEach((c) => c.destroy());
      charts = {};
      $("job-charts").replaceChildren();
      $("job-events").replaceChildren();
      $("job-plan").replaceChildren(el("p", "no plan yet"));
    }
    const job = await api("/api/v1/jobs/" + encodeURIComponent(id));
    $("job-title").textContent = job.id + " (" + job.kind + ")";
    $("job-state").textContent = job.state;
    $("job-state").className = "state state-" + job.state;
    $("job-progress").value = job.progress;
    $("job-figures").textContent = figures(job);
    $("job-reason").textContent = job.reason || "";
    $("job-stop").disabled = !["pending", "planning", "running"].includes(job.state);
    if (!jobState.planShown) {
      try {
        planTables(await api("/api/v1/jobs/" + encodeURIComponent(id) + "/plan"));
        jobState.planShown = true;
      } catch (err) { /* no plan yet */ }
    }
    drawCharts(await api("/api/v1/jobs/" + encodeURIComponent(id) + "/metrics"));
    const events = await api("/api/v1/jobs/" + encodeURIComponent(id) + "/events?after=" + jobState.lastEvent);
    for (const e of events) {
      $("job-events").append(el("li", new Date(e.at * 1000).toLocaleTimeString() + "  " + e.kind + ": " + e.message));
      jobState.lastEvent = e.id;
    }
  }

  // ---- routing ------------------------------------------------------------------------
  function route() {
    clearInterval(timer);
    if (!sessionStorage.getItem(KEY)) { show("login"); return; }
    const parts = location.hash.replace(/^#\/?/, "").split("/");
    let render;
    if (parts[0] === "jobs" && parts[1]) {
      show("view-job");
      render = () => renderJob(decodeURIComponent(parts[1]));
    } else if (parts[0] === "jobs") {
      show("view-jobs");
      render = renderJobs;
    } else {
      show("view-cluster");
      render = renderCluster;
    }
    const tick = async () => {
      try { await render(); status("updated " + new Date().toLocaleTimeString()); }
      catch (err) { if (err.message !== "401") status(err.message, true); }
    };
    tick();
    timer = setInterval(tick, POLL_MS);
  }

  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("token").value.trim());
    $("token").value = "";
    try {
      await api("/api/v1/health");
      $("login-error").textContent = "";
      if (!location.hash) location.hash = "#/cluster";
      route();
    } catch (err) { if (err.message !== "401") $("login-error").textContent = err.message; }
  });
  $("logout").addEventListener("click", () => logout(""));
  $("job-stop").addEventListener("click", async () => {
    try { await api("/api/v1/jobs/" + encodeURIComponent(jobState.id) + "/stop", { method: "POST" }); }
    catch (err) { status(err.message, true); }
  });
  $("fault-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { kind: $("fault-kind").value, device: $("fault-device").value,
                   seconds: Number($("fault-seconds").value) };
    if ($("fault-peer").value) body.peer = $("fault-peer").value;
    try {
      const fault = await api("/api/v1/faults", { method: "POST", body });
      $("fault-result").textContent = "injected " + fault.kind + " on " + fault.target;
    } catch (err) { $("fault-result").textContent = err.message; }
  });
  window.addEventListener("hashchange", route);
  route();
})();
