# convergence.gp — training curves from CSV logs: loss on the left axis, accuracy (when present)
# on the right, one colour per run.  A log with a "test" column (train --csv) is two series per
# quantity: its tenth-of-an-epoch training rows (test = 0, thin line) and its per-epoch rows
# (test = 1: the epoch's training loss and the test accuracy, points).
# Variables: files, titles (space-separated), split (0/1 per file: has "test"), xcol, ycol,
# y2col ("" for none), title, xlabel, xint (1: a tick per whole epoch).
load common
set datafile separator comma
set title title
set xlabel xlabel
set ylabel ycol
set grid lc rgb "#e5e5e5"
# the legend above the plot, clear of the x axis label
set key outside top center horizontal samplen 2 spacing 1.1 maxrows 2
set bmargin 4
if (xint) {
  set xtics 1
  set format x "%.0f"
}
n = words(files)
sp(i) = word(split, i) + 0
# rows of one kind (0: training rows, 1: per-epoch rows; a log without "test": all of them)
pick(i, kind, col) = sp(i) == 0 ? (kind == 0 ? column(col) : NaN) : (column("test") == kind ? column(col) : NaN)
what(i, kind) = sp(i) == 0 ? "" : (kind == 0 ? " (tenth of an epoch)" : " (per epoch)")
# a series a log does not have: no key entry
key(i, kind, text) = (sp(i) == 0 && kind == 1) ? "" : text.what(i, kind)
set datafile missing NaN
if (y2col ne "") {
  set y2label y2col
  set y2tics
  set ytics nomirror
  plot for [i=1:n] word(files, i) using xcol:(pick(i, 0, ycol)) with lines lw 1.5 lc i \
         title key(i, 0, word(titles, i)." ".ycol), \
       for [i=1:n] word(files, i) using xcol:(pick(i, 1, ycol)) with linespoints lw 2.5 pt 7 ps 0.9 lc i \
         title key(i, 1, word(titles, i)." ".ycol), \
       for [i=1:n] word(files, i) using xcol:(pick(i, 0, y2col)) axes x1y2 with lines lw 1.5 dt 2 lc i \
         title key(i, 0, word(titles, i)." ".y2col), \
       for [i=1:n] word(files, i) using xcol:(pick(i, 1, y2col)) axes x1y2 with linespoints lw 2.5 dt 2 pt 6 ps 0.9 \
         lc i title key(i, 1, word(titles, i)." ".y2col)
} else {
  plot for [i=1:n] word(files, i) using xcol:(pick(i, 0, ycol)) with lines lw 1.5 lc i title key(i, 0, word(titles, i)), \
       for [i=1:n] word(files, i) using xcol:(pick(i, 1, ycol)) with linespoints lw 2.5 pt 7 ps 0.9 lc i \
         title key(i, 1, word(titles, i))
}
