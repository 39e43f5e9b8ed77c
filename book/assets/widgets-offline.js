// Loaded between require.js and the widget manager (embed-amd.js) on pages with widgets.
(function () {
  var here = document.currentScript.src.replace(/[?#].*$/, "").replace(/[^/]*$/, "");
  // The widget manager finds its icon fonts through its AMD module path; they sit next to this file.
  if (window.require && window.require.config) {
    window.require.config({paths: {"@jupyter-widgets/html-manager/dist": here.replace(/\/$/, "")}});
  }
  // The widget manager typesets labels with the MathJax 2 call MathJax.Hub.Queue; the site loads
  // MathJax 3, which has typesetPromise instead.
  var hub = {Queue: function (job) {
    var mj = window.MathJax, el = job && job[2];
    if (mj && mj.typesetPromise) { mj.typesetPromise(el ? [el] : undefined).catch(function () {}); }
  }};
  var mj = window.MathJax = window.MathJax || {};
  if (mj.typesetPromise) { mj.Hub = hub; return; }          // MathJax 3 already running
  mj.Hub = hub;                                              // calls before MathJax 3 starts
  var startup = mj.startup = mj.startup || {};
  var ready = startup.ready;
  startup.ready = function () {
    if (ready) { ready(); } else { window.MathJax.startup.defaultReady(); }
    window.MathJax.Hub = hub;
  };
})();
