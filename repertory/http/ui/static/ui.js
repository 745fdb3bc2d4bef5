// repertory web UI: the live feed of a session page (server-sent events) and nothing else.
// Pages work without this file; with it, a running turn streams in and the page refreshes its
// conversation and panel when the run comes to rest. EventSource reconnects by itself and sends
// Last-Event-ID (the seq of the last durable event), so the server resumes right after it.
(function () {
  "use strict";
  function start() {
    var box = document.getElementById("session");
    if (!box || !window.EventSource) return;
    var live = document.getElementById("live");
    var text = document.getElementById("live-text");
    var reasoning = document.getElementById("live-reasoning");
    var state = document.getElementById("live-state");
    var source = new EventSource(box.dataset.live);
    window.repertoryLive = source;

    // Each fragment (conversation, panel) reloads on its own, and the newest request's answer wins.
    // Not htmx.ajax: without a source element every htmx.ajax call queues on <body>, and a request
    // queued there while another is in flight replaces the one queued before it, so a panel reload
    // could drop the conversation reload that a turn's start had asked for (its input never showed).
    var asked = {};
    function refresh(url, id) {
      var n = (asked[id] || 0) + 1;
      asked[id] = n;
      fetch(url, { credentials: "same-origin", headers: { "HX-Request": "true" } })
        .then(function (r) { return r.ok && !r.redirected ? r.text() : null; })
        .then(function (html) {
          var target = document.getElementById(id);
          if (html === null || asked[id] !== n || !target) return;  // a newer reload is on its way
          var holder = document.createElement("div");
          holder.innerHTML = html;  // rendered and escaped by the server's templates
          var fresh = holder.querySelector("#" + id);
          if (!fresh) return;
          target.replaceWith(fresh);
          if (window.htmx) window.htmx.process(fresh);  // its forms (decisions, fork) post through htmx
        })
        .catch(function () { /* offline: the next event or a reconnect reloads it */ });
    }
    function clearLive() {
      text.textContent = "";
      reasoning.textContent = "";
      reasoning.parentElement.hidden = true;
      live.hidden = true;
    }
    document.body.addEventListener("repertory-panel", function () { refresh(box.dataset.panel, "panel"); });
    source.addEventListener("open", function () { state.textContent = "Live."; box.dataset.connected = "1"; });
    source.addEventListener("error", function () { state.textContent = "Reconnecting…"; box.dataset.connected = "0"; });
    source.addEventListener("delta", function (e) {
      live.hidden = false;
      text.textContent += JSON.parse(e.data).text;
    });
    source.addEventListener("reasoning", function (e) {
      live.hidden = false;
      reasoning.parentElement.hidden = false;
      reasoning.textContent += JSON.parse(e.data).text;
    });
    source.addEventListener("items", function (e) {
      var conversation = document.getElementById("conversation");
      var holder = document.createElement("div");
      // Rendered and escaped by the server's templates, like the page itself.
      holder.innerHTML = JSON.parse(e.data).html;
      var empty = conversation.querySelector(":scope > .empty");
      if (empty) empty.remove();
      // A running turn's input shown from its turn row: the checkpoint's messages now hold it.
      Array.prototype.slice.call(conversation.querySelectorAll(":scope > .pending")).forEach(function (n) { n.remove(); });
      Array.prototype.slice.call(holder.children).forEach(function (node) {
        if (!node.id || !document.getElementById(node.id)) conversation.appendChild(node);
      });
      clearLive();
    });
    source.addEventListener("status", function (e) {
      var data = JSON.parse(e.data);
      state.textContent = data.type === "turn.started" ? "Running…" : data.rest ? "At rest." : state.textContent;
      if (data.rest) {
        clearLive();
        refresh(box.dataset.conversation, "conversation");
        refresh(box.dataset.panel, "panel");
      } else if (data.type === "turn.started") {
        refresh(box.dataset.conversation, "conversation");  // shows the turn's input from its turn row
        refresh(box.dataset.panel, "panel");
      }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
