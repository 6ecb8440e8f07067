// Filter the episodes by outcome and by words in their transcript (every word must match).
// The state lives in the URL (#outcome=…&q=…, or ?q=… on first load) so a view can be linked.
(function () {
  var input = document.getElementById("q");
  var episodes = Array.prototype.slice.call(document.querySelectorAll(".episode"));
  var buttons = Array.prototype.slice.call(document.querySelectorAll(".tag"));
  var count = document.getElementById("count");
  var none = document.getElementById("none");
  var texts = episodes.map(function (e) { return e.textContent.toLowerCase(); });
  var outcome = "";

  function apply() {
    var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    episodes.forEach(function (e, i) {
      var ok = (!outcome || e.dataset.outcome === outcome) &&
        words.every(function (w) { return texts[i].indexOf(w) >= 0; });
      e.hidden = !ok;
      if (ok) shown++;
    });
    buttons.forEach(function (b) { b.setAttribute("aria-pressed", b.dataset.outcome === outcome); });
    count.textContent = shown + " of " + episodes.length + " episodes";
    none.hidden = shown > 0;
  }

  function save() {
    var params = new URLSearchParams();
    if (outcome) params.set("outcome", outcome);
    if (input.value) params.set("q", input.value);
    var hash = params.toString();
    history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search);
  }

  function load() {
    var params = new URLSearchParams(location.hash.slice(1) || location.search.slice(1));
    input.value = params.get("q") || "";
    outcome = params.get("outcome") || "";
    if (params.get("open")) {
      var target = document.getElementById(params.get("open"));
      if (target) target.open = true;
    }
    apply();
  }

  input.addEventListener("input", function () { apply(); save(); });
  buttons.forEach(function (b) {
    b.addEventListener("click", function () { outcome = b.dataset.outcome; apply(); save(); });
  });
  window.addEventListener("hashchange", load);
  load();
})();
