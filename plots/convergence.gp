# convergence.gp — training curves from CSV logs: loss on the left axis, accuracy (when present)
# on the right, one colour per run.
# Variables: files, titles (space-separated), xcol, ycol, y2col ("" for none), title, xlabel.
load common
set datafile separator comma
set title title
set xlabel xlabel
set ylabel ycol
set grid lc rgb "#e5e5e5"
n = words(files)
if (y2col ne "") {
  set y2label y2col
  set y2tics
  set ytics nomirror
  plot for [i=1:n] word(files, i) using xcol:ycol with linespoints lw 2 pt 7 ps 0.5 lc i title word(titles, i)." ".ycol, \
       for [i=1:n] word(files, i) using xcol:y2col axes x1y2 with linespoints lw 2 dt 2 pt 6 ps 0.5 lc i title word(titles, i)." ".y2col
} else {
  plot for [i=1:n] word(files, i) using xcol:ycol with linespoints lw 2 pt 7 ps 0.5 lc i title word(titles, i)
}
