// Filter the cards by the search box (every word must match) and the pressed tags (all must match).
// The state lives in the URL (#q=…&tag=…, or ?q=… on first load) so a filtered view can be linked.
(function () {
  var input = document.getElementById("q");
  var cards = Array.prototype.slice.call(document.querySelectorAll(".card"));
  var buttons = Array.prototype.slice.call(document.querySelectorAll(".tag"));
  var count = document.getElementById("count");
  var none = document.getElementById("none");
  var selected = new Set();

  function apply() {
    var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    cards.forEach(function (card) {
      var text = card.dataset.search;
      var tags = card.dataset.tags.split("\n");
      var ok = words.every(function (w) { return text.indexOf(w) >= 0; }) &&
        Array.from(selected).every(function (t) { return tags.indexOf(t) >= 0; });
      card.hidden = !ok;
      if (ok) shown++;
    });
    buttons.forEach(function (b) { b.setAttribute("aria-pressed", selected.has(b.dataset.tag)); });
    count.textContent = shown + " of " + cards.length + " environments";
    none.hidden = shown > 0;
  }

  function save() {
    var params = new URLSearchParams();
    if (input.value) params.set("q", input.value);
    selected.forEach(function (t) { params.append("tag", t); });
    var hash = params.toString();
    history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search);
  }

  function load() {
    var params = new URLSearchParams(location.hash.replace(/^#/, "") || location.search);
    input.value = params.get("q") || "";
    selected = new Set(params.getAll("tag"));
    apply();
  }

  input.addEventListener("input", function () { apply(); save(); });
  buttons.forEach(function (b) {
    b.addEventListener("click", function () {
      var t = b.dataset.tag;
      if (selected.has(t)) selected.delete(t); else selected.add(t);
      apply(); save();
    });
  });
  window.addEventListener("hashchange", load);
  load();
})();
