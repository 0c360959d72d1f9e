// Draws each chart of a console page from the figure JSON beside it; no inline script needed.
(function () {
  "use strict";
  function draw() {
    var divs = document.querySelectorAll("div.tp-chart");
    var drawn = 0;
    divs.forEach(function (div) {
      var holder = document.getElementById(div.id + "-data");
      if (!holder) return;
      var fig = JSON.parse(holder.textContent);
      Plotly.newPlot(div, fig.data, fig.layout || {}, { displaylogo: false, responsive: true }).then(function () {
        drawn += 1;
        document.body.dataset.drawn = String(drawn);
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
