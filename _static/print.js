/* Printing the book (_static/print.css lays the page out; tools/pdf.py writes the PDF edition with it).
 *
 * MathJax typesets lazily (_config.yml loads ui/lazy): a formula is drawn only when it scrolls into
 * view, so a page printed as it stands loses every formula below the fold. MathJax typesets all on
 * `beforeprint` itself, but a print that does not wait for the event loop (a headless
 * --print-to-pdf, a print preview) can be made before that has finished. So:
 *   - `window.bookPrintReady()` typesets every formula, waits for the fonts and pictures and
 *     resolves when the page is ready to print (tools/pdf.py awaits it before each page);
 *   - Ctrl/Cmd+P and window.print() wait for it before they open the print dialog;
 *   - `beforeprint` typesets what is left at once and puts every explorer back on its default
 *     frame (the figure its caption describes); `afterprint` restores the reader's frames.
 *     Typesetting is synchronous there (so a print from the browser's menu has the maths) only if
 *     no TeX extension is still to be fetched: once the page is idle, the one extension the book's
 *     TeX autoloads (\boldsymbol, 4 KB) is fetched ahead (`window.bookPrintPreloaded`);
 *   - a page opened for printing (`?print`, as tools/pdf.py and a headless print open it)
 *     typesets everything as soon as MathJax has started.
 * Lazy pictures (explorers' default frames, figures with loading="lazy") are fetched by bookPrintReady (so by
 * `?print`, `make pdf`, Ctrl/Cmd+P); a print from the browser's menu straight after load can miss those not yet
 * fetched (as ordinary lazy figures already could).
 * Loaded as a plain script in the head (Jupyter Book adds every file of _static/): it only
 * installs listeners until the page has loaded.
 */
(function () {
  "use strict";

  function mathDocument() {
    var mj = window.MathJax;
    return mj && mj.startup && mj.startup.document;
  }

  // Typeset every formula now (MathJax's lazy extension draws only those that were in view).
  function typesetAll() {
    var doc = mathDocument();
    if (!doc) return Promise.resolve();
    if (typeof doc.lazyTypesetAll === "function") return doc.lazyTypesetAll();
    return window.MathJax.typesetPromise ? window.MathJax.typesetPromise() : Promise.resolve();
  }

  function whenMathJaxStarted() {
    return new Promise(function (resolve) {
      (function poll() {
        var mj = window.MathJax;
        if (mj && mj.startup && mj.startup.promise) resolve(mj.startup.promise);
        else if (document.readyState === "complete" && !document.querySelector('script[src*="mathjax"]')) resolve();
        else setTimeout(poll, 20);
      })();
    });
  }

  // The build marks pictures loading="lazy" (_ext/page_assets.py): a printed page needs every one,
  // and a lazy picture out of view (or in a closed menu) would never fire the load awaited below.
  function loadEveryPicture() {
    document.querySelectorAll('img[loading="lazy"]').forEach(function (img) {
      img.loading = "eager";
    });
  }

  function picturesLoaded() {
    loadEveryPicture();
    var pending = Array.prototype.filter.call(document.images, function (img) {
      return !img.complete;
    });
    return Promise.all(pending.map(function (img) {
      return new Promise(function (resolve) {
        img.addEventListener("load", resolve, { once: true });
        img.addEventListener("error", resolve, { once: true });
      });
    }));
  }

  // Each explorer's default frame, as the page shipped it, and the frame a reader moved it to.
  var defaults = new Map(), moved = new Map();
  function rememberDefaults() {
    document.querySelectorAll("img.book-explorer-frame").forEach(function (img) {
      if (!defaults.has(img)) defaults.set(img, img.getAttribute("src"));
    });
  }
  function showDefaultFrames() {
    rememberDefaults();
    defaults.forEach(function (src, img) {
      if (img.getAttribute("src") !== src) {
        moved.set(img, img.getAttribute("src"));
        img.setAttribute("src", src);
      }
    });
  }
  function restoreFrames() {
    moved.forEach(function (src, img) {
      img.setAttribute("src", src);
    });
    moved.clear();
  }

  var ready = null;
  window.bookPrintReady = function () {
    if (!ready) {
      ready = whenMathJaxStarted()
        .then(typesetAll)
        .then(function () {
          // Lay the typeset page out once, so that the fonts it needs start loading, then wait for them.
          return new Promise(function (resolve) {
            requestAnimationFrame(function () {
              void document.body.offsetHeight;
              resolve(document.fonts ? document.fonts.ready : null);
            });
          });
        })
        .then(picturesLoaded)
        .then(function () {
          document.documentElement.classList.add("book-print-ready");
        });
      ready.catch(function () {
        ready = null; // a failed attempt is tried again on the next print
      });
    }
    return ready;
  };

  // Printing through the keyboard or the page's own print() waits until everything is typeset.
  var print = window.print.bind(window);
  window.print = function () {
    showDefaultFrames();
    window.bookPrintReady().then(print, print);
  };
  document.addEventListener(
    "keydown",
    function (event) {
      var key = (event.key || "").toLowerCase();
      if (key === "p" && (event.ctrlKey || event.metaKey) && !event.altKey && !event.shiftKey) {
        event.preventDefault();
        window.print();
      }
    },
    true
  );

  // A print started elsewhere (the browser's menu): typeset what is left now (synchronous once
  // MathJax's fonts and extensions are loaded) and show each explorer's default frame.
  window.addEventListener("beforeprint", function () {
    loadEveryPicture();
    showDefaultFrames();
    typesetAll();
  });
  window.addEventListener("afterprint", restoreFrames);

  // The line under each explorer names the page where it is interactive: its full address, as read.
  function spellOutLinks() {
    document.querySelectorAll(".book-explorer-print-line a").forEach(function (a) {
      a.textContent = a.href;
    });
  }

  // The TeX extensions MathJax would autoload while typesetting (measured on every chapter: only
  // boldsymbol), fetched once the page is idle so that `beforeprint` can typeset at once.
  var PRELOAD = ["[tex]/boldsymbol"];
  window.bookPrintPreloaded = new Promise(function (resolve) {
    window.addEventListener("load", function () {
      whenMathJaxStarted().then(function () {
        var idle = window.requestIdleCallback || function (f) { return setTimeout(f, 200); };
        idle(function () {
          var mj = window.MathJax;
          resolve(mj && mj.loader ? mj.loader.load.apply(mj.loader, PRELOAD).catch(function () {}) : null);
        }, { timeout: 3000 });
      });
    });
  });

  document.addEventListener("DOMContentLoaded", function () {
    rememberDefaults();
    spellOutLinks();
  });
  // Opened to be printed (?print): typeset everything up front.
  if (/[?&]print\b/.test(window.location.search)) {
    window.addEventListener("load", function () {
      window.bookPrintReady();
    });
  }
})();
