# memory.gp — each stage's total memory over time, as a step function.
# Variables: data (blocks "t bytes", one per stage, separated by two blank lines), lanes, title,
#            xlabel, ylabel, scale (bytes per y unit).
load common
set title title
set xlabel xlabel
set ylabel ylabel
set grid lc rgb "#e5e5e5"
set yrange [0:*]
set key outside right top vertical
plot for [i=0:lanes-1] data index i using 1:($2/scale) with steps lw 2 title sprintf("stage %d", i+1)
