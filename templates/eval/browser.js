// The run browser: filter (words and environment), sort by a column, pick two runs to compare.
// The state lives in the URL fragment (#q=…&env=…&sort=score&desc=1&compare=A,B) so a view can
// be linked. Comparisons were computed by envbuilder (the same code as `eval compare`).
(function () {
  var data = JSON.parse(document.getElementById("data").textContent);
  var input = document.getElementById("q");
  var envSelect = document.getElementById("env");
  var body = document.querySelector("#runs tbody");
  var rows = Array.prototype.slice.call(body.querySelectorAll("tr.run"));
  var heads = Array.prototype.slice.call(document.querySelectorAll("#runs th[data-sort]"));
  var picks = Array.prototype.slice.call(document.querySelectorAll(".pick"));
  var count = document.getElementById("count");
  var none = document.getElementById("none");
  var panel = document.getElementById("comparison");
  var state = { q: "", env: "", sort: "", desc: false, compare: [] };

  function read() {
    var params = new URLSearchParams(location.hash.slice(1) || location.search.slice(1));
    state.q = params.get("q") || "";
    state.env = params.get("env") || "";
    state.sort = params.get("sort") || "";
    state.desc = params.get("desc") === "1";
    state.compare = (params.get("compare") || "").split(",").filter(Boolean).slice(0, 2);
  }

  function write() {
    var params = new URLSearchParams();
    if (state.q) params.set("q", state.q);
    if (state.env) params.set("env", state.env);
    if (state.sort) params.set("sort", state.sort);
    if (state.desc) params.set("desc", "1");
    if (state.compare.length) params.set("compare", state.compare.join(","));
    history.replaceState(null, "", "#" + params.toString());
  }

  function value(row, key) {
    var v = row.dataset[key] || "";
    return key === "score" || key === "episodes" ? (v === "" ? -Infinity : parseFloat(v)) : v.toLowerCase();
  }

  function apply() {
    input.value = state.q;
    envSelect.value = state.env;
    var words = state.q.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (row) {
      var text = [row.dataset.model, row.dataset.env, row.dataset.hash, row.dataset.split, row.dataset.id]
        .join(" ").toLowerCase();
      var ok = (!state.env || row.dataset.env === state.env) &&
        words.every(function (w) { return text.indexOf(w) >= 0; });
      row.hidden = !ok;
      if (ok) shown++;
    });
    count.textContent = shown + " of " + rows.length + " runs";
    none.hidden = shown > 0;
    if (state.sort) {
      var sorted = rows.slice().sort(function (a, b) {
        var x = value(a, state.sort), y = value(b, state.sort);
        var c = x < y ? -1 : x > y ? 1 : 0;
        return state.desc ? -c : c;
      });
      sorted.forEach(function (row) { body.appendChild(row); });
    }
    heads.forEach(function (th) {
      th.setAttribute("aria-sort", th.dataset.sort === state.sort ? (state.desc ? "descending" : "ascending") : "none");
    });
    picks.forEach(function (box) { box.checked = state.compare.indexOf(box.value) >= 0; });
    compare();
  }

  function model(id) {
    var row = document.getElementById("run-" + id);
    return row ? row.dataset.model + " (" + id + ")" : id;
  }

  function compare() {
    if (state.compare.length !== 2) { panel.hidden = true; return; }
    panel.hidden = false;
    var a = state.compare[0], b = state.compare[1];
    var what = document.getElementById("comparison-what");
    var result = document.getElementById("comparison-result");
    var notes = document.getElementById("comparison-notes");
    what.textContent = "B − A: " + model(b) + " (B) vs " + model(a) + " (A)";
    notes.textContent = "";
    var c = data.comparisons[a + "," + b];
    if (!c) {
      result.textContent = "These runs are on different environments: there is no paired comparison.";
      return;
    }
    if (c.error) { result.textContent = c.error; return; }
    var verdict = c.significant ? "a real difference at 95%" : "no difference distinguishable from 0 at 95%";
    result.innerHTML = "";
    var strong = document.createElement("span");
    strong.className = "verdict";
    strong.textContent = verdict;
    result.appendChild(document.createTextNode(
      c.tasks + " tasks graded in both runs: A " + c.a.toFixed(3) + ", B " + c.b.toFixed(3) + ", B − A " + c.text + ": "));
    result.appendChild(strong);
    var lines = c.notes.concat(c.left_out.map(function (text) { return "left out: " + text; }));
    lines.forEach(function (text) {
      var li = document.createElement("li");
      li.textContent = text;
      notes.appendChild(li);
    });
  }

  input.addEventListener("input", function () { state.q = input.value; write(); apply(); });
  envSelect.addEventListener("change", function () { state.env = envSelect.value; write(); apply(); });
  heads.forEach(function (th) {
    th.addEventListener("click", function () {
      state.desc = state.sort === th.dataset.sort ? !state.desc : th.dataset.sort === "score";
      state.sort = th.dataset.sort;
      write(); apply();
    });
  });
  picks.forEach(function (box) {
    box.addEventListener("change", function () {
      var rest = state.compare.filter(function (id) { return id !== box.value; });
      state.compare = box.checked ? rest.concat([box.value]).slice(-2) : rest;
      write(); apply();
    });
  });
  window.addEventListener("hashchange", function () { read(); apply(); });
  read();
  apply();
})();
