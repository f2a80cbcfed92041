// The console's progressive script: every page reads without it. It
// expands tool calls, follows a running session's transcript through
// server-sent events, and draws the overview's tables as charts.
"use strict";

document.addEventListener("DOMContentLoaded", function () {
  expandAll();
  follow();
  charts();
});

// expandAll shows the button that opens every tool call of a transcript.
function expandAll() {
  var button = document.getElementById("expand");
  if (!button) {
    return;
  }
  button.hidden = false;
  button.addEventListener("click", function () {
    var open = button.getAttribute("aria-pressed") !== "true";
    document.querySelectorAll("details.tool").forEach(function (d) {
      d.open = open;
    });
    button.setAttribute("aria-pressed", String(open));
    button.textContent = open ? "Collapse all tool calls" : "Expand all tool calls";
  });
}

// follow appends the entries of a running session as they are stored:
// the server renders them (escaped) and sends them as "entries" events,
// and an "end" event once the session stopped.
function follow() {
  var transcript = document.getElementById("transcript");
  if (!transcript || !transcript.dataset.live || !window.EventSource) {
    return;
  }
  var status = document.getElementById("live");
  var phase = document.getElementById("phase");
  status.textContent = "Following the session live…";
  var events = new EventSource(transcript.dataset.live);
  events.addEventListener("entries", function (e) {
    transcript.insertAdjacentHTML("beforeend", e.data);
  });
  events.addEventListener("end", function (e) {
    events.close();
    status.textContent = "The session stopped: " + e.data + ".";
    status.dataset.ended = e.data;
    if (phase) {
      phase.textContent = e.data;
    }
  });
}

// charts draws the overview's charts with uPlot from /overview.json.
function charts() {
  var plots = document.querySelectorAll("[data-chart]");
  if (plots.length === 0 || !window.uPlot) {
    return;
  }
  fetch("/overview.json" + location.search)
    .then(function (r) { return r.json(); })
    .then(function (data) {
      var colors = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0969da", "#57606a"];
      data.charts.forEach(function (c) {
        var el = document.querySelector('[data-chart="' + c.id + '"]');
        if (!el || c.series.length === 0) {
          return;
        }
        var series = [{}];
        var values = [data.days];
        c.series.forEach(function (s, i) {
          series.push({ label: s.name, stroke: colors[i % colors.length], width: 2 });
          values.push(s.values);
        });
        new uPlot({
          width: Math.min(900, el.clientWidth || 900),
          height: 260,
          series: series,
          axes: [{}, { label: c.unit }],
        }, values, el);
        el.dataset.drawn = "true";
      });
    });
}
