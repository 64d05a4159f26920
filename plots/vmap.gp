# vmap.gp — heat map of the simulated steady-state v over workers W and micro-batches N; cells where
# the published Eq. 3 disagrees are circled.
# Variables: data (W N v eq3 disagree), title, wmin, wmax, nmin, nmax, vmax, cells (label values: 0/1).
load common
# a long title on two lines, before its parenthesis (it ran past the picture's left edge)
cut = strstrt(title, " (")
set title (cut > 0 ? title[1:cut - 1] . "\n" . title[cut + 1:] : title)
set xlabel "micro-batches N"
set ylabel "workers W"
set xrange [nmin-0.5:nmax+0.5]
set yrange [wmin-0.5:wmax+0.5]
set cbrange [0.5:vmax+0.5]
set cbtics 1
set cblabel "steady-state v"
set palette defined (0 "#f7fbff", 1 "#c6dbef", 2 "#6baed6", 3 "#2171b5", 4 "#08306b")
set xtics out
set ytics out
plot data using 2:1:3 with image notitle, \
     data using 2:($5 > 0 ? $1 : 1/0) with points pt 6 ps (cells ? 2.2 : 0.9) lw 1.5 lc rgb "#d62728" title "Eq. 3 disagrees", \
     data using 2:(cells ? $1 : 1/0):(sprintf("%d", $3)):($3 > 0.5 + 0.6 * vmax ? 0xffffff : 0x333333) \
          with labels font ",8" tc rgb variable notitle
