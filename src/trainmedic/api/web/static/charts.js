// Draws the charts of a server-rendered page from the JSON it embeds (#chart-data).
// Every figure is also in a table on the page: the charts only make it quicker to read.
(function () {
  "use strict";
  var COLORS = {
    productive: "#2e9e5b", checkpoint: "#6b9bd2", lost_work: "#b42318", detection: "#f79009",
    decision_action: "#7a5af8", human_wait: "#e04f9b", restart: "#12b0c9", startup: "#98a2b3",
    other: "#d0d5dd", shutdown: "#667085",
    gpu_hardware: "#b42318", network_hardware: "#f79009", node_hardware: "#dc6803",
    system_software: "#7a5af8", storage: "#12b0c9", application: "#2e90fa", scheduler: "#98a2b3",
    unknown: "#667085", unattributed: "#d0d5dd"
  };
  function label(s) { return s.replace("decision_action", "decision / action").split("_").join(" "); }
  function color(k) { return COLORS[k] || "#999"; }
  function seconds(v) { return v.toFixed(1) + " s"; }

  function badput(canvas, data) {
    var names = Object.keys(data.windows);
    return new Chart(canvas, {
      type: "bar",
      data: {
        labels: names.map(function (n) { return "last " + n; }),
        datasets: data.causes.map(function (c) {
          return { label: label(c), backgroundColor: color(c),
                   data: names.map(function (n) { return data.windows[n][c] || 0; }) };
        })
      },
      options: { indexAxis: "y", maintainAspectRatio: false, animation: false,
                 scales: { x: { stacked: true, title: { display: true, text: "badput, seconds" } },
                           y: { stacked: true } } }
    });
  }

  function parts(canvas, data) {
    var keys = Object.keys(data.parts);
    return new Chart(canvas, {
      type: "bar",
      data: { labels: ["wall time"], datasets: keys.map(function (k) {
        return { label: label(k), backgroundColor: color(k), data: [data.parts[k] || 0] };
      }) },
      options: { indexAxis: "y", maintainAspectRatio: false, animation: false,
                 plugins: { title: { display: true, text: "Where the job's wall time went" },
                            tooltip: { callbacks: { label: function (c) { return c.dataset.label + ": " + seconds(c.raw); } } } },
                 scales: { x: { stacked: true, title: { display: true, text: "seconds" } }, y: { stacked: true } } }
    });
  }

  function gantt(canvas, data) {
    var names = ["lost_work", "shutdown", "detection", "decision_action", "restart"];
    var labels = data.gantt.map(function (g) { return g.label; });
    return new Chart(canvas, {
      type: "bar",
      data: { labels: labels, datasets: names.map(function (n) {
        return { label: label(n), backgroundColor: color(n), grouped: true,
                 data: data.gantt.map(function (g) {
                   var p = g.phases.filter(function (x) { return x.part === n; })[0];
                   return p ? [p.start, p.end] : null;
                 }) };
      }) },
      options: { indexAxis: "y", maintainAspectRatio: false, animation: false,
                 plugins: { title: { display: true, text: "Each interruption's phases (s from the last progress)" } },
                 scales: { x: { title: { display: true, text: "seconds from the last progress" } } } }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var source = document.getElementById("chart-data");
    if (!source || typeof Chart === "undefined") { return; }
    var data = JSON.parse(source.textContent);
    var draw = { badput: badput, parts: parts, gantt: gantt };
    document.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
      var kind = canvas.getAttribute("data-chart");
      if (kind === "gantt" && (!data.gantt || !data.gantt.length)) { canvas.parentNode.style.display = "none"; return; }
      draw[kind](canvas, data);
      canvas.setAttribute("data-drawn", "1");
    });
  });
})();
