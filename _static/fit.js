// Marks each display equation or table that scrolls sideways in its own box (issue 31).
//
// _static/fit.css lets a wide equation or table scroll inside its box rather than be cut off. On a
// phone a scroll bar shows only while scrolling, so this script tells the stylesheet which boxes
// hide part of their content (.fit-scrolls) and on which side (.fit-more-start, .fit-more-end);
// the stylesheet fades that edge. It looks again whenever the page changes (MathJax typesets an
// equation as it comes into view), a box changes size (a rotated phone, an opened solution) or a
// box is scrolled. A table the Markdown marks .fit-cards is shown as cards instead where it would
// not fit. Jupyter Book loads this file as a plain script in <head>: it waits for the page.
(() => {
  "use strict";
  const BOXES = 'div.math > mjx-container[display="true"], .pst-scrollable-table-container';
  const seen = new WeakSet();
  const resized = "ResizeObserver" in window ? new ResizeObserver(() => schedule()) : null;
  let pending = false;

  function mark(box) {
    const hidden = box.scrollWidth - box.clientWidth;
    const scrolls = hidden > 0;
    const offset = Math.abs(box.scrollLeft);
    box.classList.toggle("fit-scrolls", scrolls);
    box.classList.toggle("fit-more-start", scrolls && offset > 1);
    box.classList.toggle("fit-more-end", scrolls && offset < hidden - 1);
    // A table that scrolls can be scrolled with the keyboard too (MathJax makes equations focusable).
    if (scrolls && box.matches(".pst-scrollable-table-container") && !box.hasAttribute("tabindex")) {
      box.setAttribute("tabindex", "0");
    }
  }

  // A table marked .fit-cards becomes a stack of cards (fit.css) when it is wider than its box.
  function reflow(table) {
    const headers = [...table.querySelectorAll(":scope > thead > tr:last-child > th")].map((th) =>
      th.textContent.trim());
    table.querySelectorAll(":scope > tbody > tr").forEach((row) => {
      [...row.children].forEach((cell, i) => {
        if (headers[i] && !cell.hasAttribute("data-label")) cell.setAttribute("data-label", headers[i]);
      });
    });
    const box = table.parentElement;
    table.classList.remove("fit-as-cards");
    table.classList.toggle("fit-as-cards", table.offsetWidth > box.clientWidth + 1);
  }

  function markAll() {
    pending = false;
    document.querySelectorAll("table.fit-cards").forEach(reflow);
    document.querySelectorAll(BOXES).forEach((box) => {
      if (!seen.has(box)) {
        seen.add(box);
        box.addEventListener("scroll", () => mark(box), { passive: true });
        if (resized) {
          resized.observe(box);
          if (box.firstElementChild) resized.observe(box.firstElementChild);
        }
      }
      mark(box);
    });
  }

  function schedule() {
    if (!pending) {
      pending = true;
      requestAnimationFrame(markAll);
    }
  }

  function start() {
    markAll();
    new MutationObserver(schedule).observe(document.body, { childList: true, subtree: true });
    window.addEventListener("resize", schedule);
    window.addEventListener("load", schedule);
    if (document.fonts) document.fonts.ready.then(schedule);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
