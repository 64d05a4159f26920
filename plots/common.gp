# common.gp — terminal and style shared by the timeprest plots.
# Set by `timeprest plot`: out (picture path), fmt ("png" or "svg"), width, height.
if (fmt eq "svg") {
  set terminal svg size width,height dynamic noenhanced font "Sans,12" background rgb "white"
} else {
  set terminal pngcairo size width,height noenhanced font "Sans,11" background rgb "white"
}
set output out
set border 3 lw 1 lc rgb "#444444"
set tics nomirror
set key outside bottom center horizontal samplen 2 spacing 1.1
set bmargin 6
